// Sum of a row-major [rows, cols] float32 matrix over its rows (column sums: tfjs's Sum over
// leading axes, e.g. a bias gradient) or over its columns (row sums: trailing axes), every term
// added in double. Float partial sums lost what cancels: one float sgemv over a million terms lost
// 0.09 % and stopped growing at 2^24 (the mean of 40 M ones was 0.42); blocks of 128 summed in float
// gave 72 for 1e8, 200 ones and -1e8 (torch 199, the sum 200).
#include <algorithm>
#include <vector>
#include "heap.h"
#include "kernels.h"

namespace {

// Σ x[0..n) in double, in 8 independent chains (one chain waits on each add's latency)
double rowSum(const float* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += x[i + j];
  double total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; i++) total += x[i];
  return total;
}

}  // namespace

// (heap, x, out, rows, cols, overRows)
napi_value Sum(napi_env env, napi_callback_info info) {
  Args args(env, info, 6);
  const int64_t rows = args.integer(3), cols = args.integer(4);
  const bool overRows = args.integer(5) != 0;
  if (args.failed) return nullptr;
  if (rows < 0 || cols < 0) return throwRange(env, "Sum: negative size");
  const float* x = args.floats(1, rows * cols);
  float* out = args.floats(2, overRows ? cols : rows);
  if (args.failed) return nullptr;
  if (!overRows || cols == 1) {  // a column of one: its rows are one contiguous run
    if (overRows) out[0] = static_cast<float>(rowSum(x, rows));
    else
      for (int64_t r = 0; r < rows; r++) out[r] = static_cast<float>(rowSum(x + r * cols, cols));
    return nullptr;
  }
  thread_local std::vector<double> total;
  total.assign(cols, 0.0);
  for (int64_t r = 0; r < rows; r++) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; c++) total[c] += row[c];
  }
  for (int64_t c = 0; c < cols; c++) out[c] = static_cast<float>(total[c]);
  return nullptr;
}
