// One Adam/AdamW update of a float32 parameter in one pass: the operations of @ddp/nn's
// tfjs version (torch.optim's _single_tensor_adam), each rounded to float32 in the same order,
// so the results are the same bits; tfjs ran about a dozen kernels over the tensor. Vectorized
// (ROW_KERNEL): the vector square root and division round each lane as the scalar ones do, and
// -ffp-contract=off keeps multiplies and adds apart, so every width gives the same bits.
#include "heap.h"
#include "kernels.h"
#include "vector-math.h"

namespace {

ROW_KERNEL void adamLoop(int64_t n, const float* p, const float* g, const float* m0,
                         const float* v0, float* p1, float* m1, float* v1,
                         float decay, float c1, float beta2, float c2, float bias2, float eps, float stepSize) {
  const bool fromStart = __builtin_fabsf(c1) < 0.5f;
  const float c1Rest = 1.0f - c1;
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const float decayed = p[i] * decay;  // × 1 when there is no weight decay: the same bits
    const float d = g[i];
    // torch.lerp's two formulas (exactly d at β1 = 0); (d·c2)·d as torch's addcmul (d·d overflows first)
    const float m = fromStart ? m0[i] + (d - m0[i]) * c1 : d - (d - m0[i]) * c1Rest;
    const float v = v0[i] * beta2 + (d * c2) * d;
    const float denom = __builtin_sqrtf(v) / bias2 + eps;
    m1[i] = m;
    v1[i] = v;
    p1[i] = decayed - (m / denom) * stepSize;
  }
}

}  // namespace

// (heap, param, grad, expAvg, expAvgSq, outParam, outExpAvg, outExpAvgSq, n,
//  decay, oneMinusBeta1, beta2, oneMinusBeta2, sqrtBiasCorrection2, eps, stepSize)
napi_value AdamStep(napi_env env, napi_callback_info info) {
  Args args(env, info, 16);
  const int64_t n = args.integer(8);
  const float decay = args.real(9), c1 = args.real(10), beta2 = args.real(11), c2 = args.real(12);
  const float bias2 = args.real(13), eps = args.real(14), stepSize = args.real(15);
  if (args.failed) return nullptr;
  if (n < 0) return throwRange(env, "AdamStep: negative size");
  const float* p = args.floats(1, n);
  const float* g = args.floats(2, n);
  const float* m0 = args.floats(3, n);
  const float* v0 = args.floats(4, n);
  float* p1 = args.floats(5, n);
  float* m1 = args.floats(6, n);
  float* v1 = args.floats(7, n);
  if (args.failed) return nullptr;
  adamLoop(n, p, g, m0, v0, p1, m1, v1, decay, c1, beta2, c2, bias2, eps, stepSize);
  return nullptr;
}
