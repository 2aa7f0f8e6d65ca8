// Rounding float32 values to bfloat16 or float16 precision, kept as float32 (autocast's casts around
// its float32 kernels): the same bits as PyTorch's `x.to(torch.bfloat16).float()` and
// `x.to(torch.float16).float()` on a CPU, NaN included. @ddp/amp's host loop (dataSync, encode,
// decode, upload) made `pnpm clip --amp bf16` 2.7× slower than float32. Branch-free integer and
// float32 arithmetic that the compiler vectorizes; in place when x and y are the same.
#include <cstdint>
#include <cstring>
#include "heap.h"
#include "kernels.h"
#include "parallel.h"
#include "vector-math.h"

namespace {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// round to nearest even on the top 16 bits; NaN becomes 0xFFFF, as ATen's vectorized conversion writes
ROW_KERNEL void toBfloat16(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const uint32_t u = bitsOf(x[i]);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    y[i] = floatOf((u & 0x7FFFFFFFu) > 0x7F800000u ? 0xFFFF0000u : rounded);
  }
}

// c10's fp16_ieee_from_fp32_value then fp16_ieee_to_fp32_value (PyTorch's scalar conversions, from
// the FP16 library): float arithmetic does the rounding, subnormals included; NaN becomes ±0x7E00
ROW_KERNEL void toFloat16(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const uint32_t w = bitsOf(x[i]);
    const uint32_t shl1 = w + w;
    const uint32_t sign = w & 0x80000000u;
    // scaling up by 2^112 then down by 2^-110 overflows what float16 cannot hold to inf
    float base = (floatOf(w & 0x7FFFFFFFu) * 0x1.0p+112f) * 0x1.0p-110f;
    uint32_t bias = shl1 & 0xFF000000u;
    bias = bias < 0x71000000u ? 0x71000000u : bias;
    base = floatOf((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = bitsOf(base);
    const uint32_t half = shl1 > 0xFF000000u ? 0x7E00u : ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
    // back to float32: normals by rebiasing the exponent, subnormals through a magic-number subtraction
    const uint32_t two = half << 17;
    const float normal = floatOf((two >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float subnormal = floatOf((two >> 17) | (126u << 23)) - 0.5f;
    y[i] = floatOf(sign | (two < (1u << 27) ? bitsOf(subnormal) : bitsOf(normal)));
  }
}

}  // namespace

// (heap, x, y, n, float16): y = x rounded to bfloat16 (float16 when the flag is set); y may be x
napi_value RoundToHalf(napi_env env, napi_callback_info info) {
  Args args(env, info, 5);
  const int64_t n = args.integer(3);
  const bool float16 = args.integer(4) != 0;
  if (args.failed) return nullptr;
  if (n < 0) return throwRange(env, "RoundToHalf: negative size");
  const float* x = args.floats(1, n);
  float* y = args.floats(2, n);
  if (args.failed) return nullptr;
  inShares(n, [&](int64_t from, int64_t to) {
    if (float16) {
      toFloat16(x + from, y + from, to - from);
    } else {
      toBfloat16(x + from, y + from, to - from);
    }
  });
  return nullptr;
}
