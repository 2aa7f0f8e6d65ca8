// Sum of a row-major [rows, cols] float32 matrix over its rows (column sums: tfjs's Sum over
// leading axes, e.g. a bias gradient) or over its columns (row sums: trailing axes), as one
// cblas_sgemv against a vector of ones.
#include <cblas.h>
#include <vector>
#include "heap.h"
#include "kernels.h"

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
  const int64_t length = overRows ? cols : rows;
  if (rows == 0 || cols == 0) {
    for (int64_t i = 0; i < length; i++) out[i] = 0;
    return nullptr;
  }
  thread_local std::vector<float> ones;
  const size_t need = static_cast<size_t>(overRows ? rows : cols);
  if (ones.size() < need) ones.assign(need, 1.0f);
  cblas_sgemv(CblasRowMajor, overRows ? CblasTrans : CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols), 1.0f, x,
              static_cast<int>(cols), ones.data(), 1, 0.0f, out, 1);
  return nullptr;
}
