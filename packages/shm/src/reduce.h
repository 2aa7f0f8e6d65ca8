// Element-wise reductions shared by reduce/divide (shm.cc) and the small all-reduce
// (exchange.cc): the semantics of @ddp/comm's reduceInto and finishAverage, bit for bit.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

// o[i] = a[i] op b[i] (o may be a: in place), with the semantics of @ddp/comm's reduceInto:
// NaN propagates through max/min; float32 results equal JavaScript's (one rounding either way).
template <typename T>
inline void ReduceFloat(T* o, const T* a, const T* b, size_t n, int op) {
  switch (op) {
    case 0: for (size_t i = 0; i < n; i++) o[i] = a[i] + b[i]; break;
    case 1: for (size_t i = 0; i < n; i++) o[i] = a[i] * b[i]; break;
    case 2: for (size_t i = 0; i < n; i++) o[i] = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i]; break;
    case 3: for (size_t i = 0; i < n; i++) o[i] = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i]; break;
  }
}

// int32 sums and products wrap, like JavaScript's `| 0` and Math.imul
inline void ReduceInt32(int32_t* o, const int32_t* a, const int32_t* b, size_t n, int op) {
  auto* w = reinterpret_cast<uint32_t*>(o);
  auto* u = reinterpret_cast<const uint32_t*>(a);
  auto* v = reinterpret_cast<const uint32_t*>(b);
  switch (op) {
    case 0: for (size_t i = 0; i < n; i++) w[i] = u[i] + v[i]; break;
    case 1: for (size_t i = 0; i < n; i++) w[i] = u[i] * v[i]; break;
    case 2: for (size_t i = 0; i < n; i++) o[i] = a[i] > b[i] ? a[i] : b[i]; break;
    case 3: for (size_t i = 0; i < n; i++) o[i] = a[i] < b[i] ? a[i] : b[i]; break;
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

