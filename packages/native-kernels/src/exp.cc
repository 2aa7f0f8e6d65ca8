// Exp over float32 (softmax, cross-entropy, the contrastive loss): tfjs-wasm's scalar loop took
// about 7 ns per value (5.5–7.6 ms for the 803 K values of a CLIP activation); glibc's vector expf
// (vector-math.h) is far faster than that.
// Large calls are shared among the OpenMP threads.
#include <omp.h>
#include <cmath>
#include "heap.h"
#include "kernels.h"
#include "parallel.h"
#include "vector-math.h"

namespace {

ROW_KERNEL void expValues(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

}  // namespace

// (heap, x, y, n): y = exp(x)
napi_value Exp(napi_env env, napi_callback_info info) {
  Args args(env, info, 4);
  const int64_t n = args.integer(3);
  if (args.failed) return nullptr;
  if (n < 0) return throwRange(env, "Exp: negative size");
  const float* x = args.floats(1, n);
  float* y = args.floats(2, n);
  if (args.failed) return nullptr;
  inShares(n, [&](int64_t from, int64_t to) { expValues(x + from, y + from, to - from); });
  return nullptr;
}
