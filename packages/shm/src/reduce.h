// Element-wise reductions shared by reduce/divide (shm.cc) and the small all-reduce
// (exchange.cc): the semantics of @ddp/comm's reduceInto and finishAverage, bit for bit.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

// dst[i] = dst[i] op src[i], with the semantics of @ddp/comm's reduceInto: NaN propagates
// through max/min; float32 results equal JavaScript's (one rounding either way).
template <typename T>
inline void ReduceFloat(T* d, const T* s, size_t n, int op) {
  switch (op) {
    case 0: for (size_t i = 0; i < n; i++) d[i] = d[i] + s[i]; break;
    case 1: for (size_t i = 0; i < n; i++) d[i] = d[i] * s[i]; break;
    case 2: for (size_t i = 0; i < n; i++) d[i] = (d[i] > s[i] || d[i] != d[i]) ? d[i] : s[i]; break;
    case 3: for (size_t i = 0; i < n; i++) d[i] = (d[i] < s[i] || d[i] != d[i]) ? d[i] : s[i]; break;
  }
}

// int32 sums and products wrap, like JavaScript's `| 0` and Math.imul
inline void ReduceInt32(int32_t* d, const int32_t* s, size_t n, int op) {
  auto* u = reinterpret_cast<uint32_t*>(d);
  auto* v = reinterpret_cast<const uint32_t*>(s);
  switch (op) {
    case 0: for (size_t i = 0; i < n; i++) u[i] = u[i] + v[i]; break;
    case 1: for (size_t i = 0; i < n; i++) u[i] = u[i] * v[i]; break;
    case 2: for (size_t i = 0; i < n; i++) d[i] = d[i] > s[i] ? d[i] : s[i]; break;
    case 3: for (size_t i = 0; i < n; i++) d[i] = d[i] < s[i] ? d[i] : s[i]; break;
  }
}

// values[i] /= divisor in place (AVG's last step); true when no result is ±Infinity. Float
// division rounds once, like JavaScript's x / n stored into a Float32Array (a double
// quotient of two floats rounds to the same float), so results are bit-identical.
// No branch in the loop, so it vectorises: q − q is 0 for a finite q and NaN for ±Infinity
// or NaN, and a NaN stays in the sums; only then are the quotients looked at for ±Infinity.
template <typename T>
inline bool DivideFloat(T* v, size_t n, T divisor) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) {
      T q = v[i + k] / divisor;
      v[i + k] = q;
      acc[k] += q - q;
    }
  T sum = 0;
  for (; i < n; i++) {
    v[i] = v[i] / divisor;
    sum += v[i] - v[i];
  }
  for (T a : acc) sum += a;
  if (sum == 0) return true;
  for (size_t k = 0; k < n; k++)
    if (std::abs(v[k]) == std::numeric_limits<T>::infinity()) return false;
  return true;
}

