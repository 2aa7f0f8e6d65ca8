// Exp over float32 (softmax, cross-entropy, the contrastive loss): tfjs-wasm's scalar loop took
// about 7 ns per value (5.5–7.6 ms for the 803 K values of a CLIP activation), glibc's expf 2.4–2.7 ms.
// Large calls are shared among the OpenMP threads.
#include <omp.h>
#include <cmath>
#include "heap.h"
#include "kernels.h"

namespace {

constexpr int64_t kParallelMin = 1 << 15;

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
#pragma omp parallel for num_threads(n >= kParallelMin ? omp_get_max_threads() : 1) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = std::exp(x[i]);
  return nullptr;
}
