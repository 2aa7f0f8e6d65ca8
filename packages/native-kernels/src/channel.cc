// Per-channel kernels over a float32 tensor seen as [outer, channels, inner]: NCHW activations are
// [N, C, H·W], NHWC ones [N·H·W, C, 1]. A convolution's bias add and its gradient, each one pass
// (tfjs-wasm's Add broadcasting a [C, 1, 1] bias over NCHW was several times slower than a plain add).
#include <omp.h>
#include <vector>
#include "heap.h"
#include "kernels.h"
#include "parallel.h"
#include "vector-math.h"

namespace {

struct Layout {
  int64_t outer, channels, inner;
  int64_t size() const { return outer * channels * inner; }
};

bool readLayout(Args& args, size_t first, const char* op, Layout& l) {
  l = {args.integer(first), args.integer(first + 1), args.integer(first + 2)};
  if (args.failed) return false;
  if (l.outer < 0 || l.channels < 1 || l.inner < 0) {
    throwRange(args.env, std::string(op) + ": bad size");
    return false;
  }
  return true;
}

ROW_KERNEL void addBias(const float* x, float b, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) y[i] = x[i] + b;
}

ROW_KERNEL void addBiases(const float* x, const float* bias, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) y[i] = x[i] + bias[i];
}

// float lanes within a row (as sgemv's; double conversions cost 40%), rows added up in double
ROW_KERNEL float rowSum(const float* x, int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

// p[c] += x[c] for one NHWC pixel's channels
ROW_KERNEL void accumulate(const float* x, double* p, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) p[i] += x[i];
}

}  // namespace

// (heap, x, bias, y, outer, channels, inner): y[o, c, i] = x[o, c, i] + bias[c]
napi_value BiasAdd(napi_env env, napi_callback_info info) {
  Args args(env, info, 7);
  Layout l;
  if (!readLayout(args, 4, "BiasAdd", l)) return nullptr;
  const float* x = args.floats(1, l.size());
  const float* bias = args.floats(2, l.channels);
  float* y = args.floats(3, l.size());
  if (args.failed) return nullptr;
  const int64_t rows = l.outer * l.channels, inner = l.inner, channels = l.channels;
  if (inner == 1) {
#pragma omp parallel for num_threads(threadsFor(l.size())) schedule(static)
    for (int64_t o = 0; o < l.outer; o++) addBiases(x + o * channels, bias, y + o * channels, channels);
    return nullptr;
  }
#pragma omp parallel for num_threads(threadsFor(l.size())) schedule(static)
  for (int64_t r = 0; r < rows; r++) addBias(x + r * inner, bias[r % channels], y + r * inner, inner);
  return nullptr;
}

// (heap, x, out, outer, channels, inner): out[c] = Σ over o and i of x[o, c, i], rows added up in double
napi_value ChannelSum(napi_env env, napi_callback_info info) {
  Args args(env, info, 6);
  Layout l;
  if (!readLayout(args, 3, "ChannelSum", l)) return nullptr;
  const float* x = args.floats(1, l.size());
  float* out = args.floats(2, l.channels);
  if (args.failed) return nullptr;
  const int64_t channels = l.channels, inner = l.inner;
  const int threads = threadsFor(l.size());
  // per-thread partial sums over a share of the outer index, added up at the end
  std::vector<double> partial(static_cast<size_t>(threads) * channels, 0.0);
#pragma omp parallel num_threads(threads)
  {
    double* p = partial.data() + static_cast<size_t>(omp_get_thread_num()) * channels;
#pragma omp for schedule(static)
    for (int64_t o = 0; o < l.outer; o++) {
      const float* block = x + o * channels * inner;
      if (inner == 1) accumulate(block, p, channels);
      else for (int64_t c = 0; c < channels; c++) p[c] += rowSum(block + c * inner, inner);
    }
  }
  for (int64_t c = 0; c < channels; c++) {
    double s = 0;
    for (int t = 0; t < threads; t++) s += partial[static_cast<size_t>(t) * channels + c];
    out[c] = static_cast<float>(s);
  }
  return nullptr;
}
