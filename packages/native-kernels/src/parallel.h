// How the elementwise, row and channel kernels share one call among the OpenMP threads (setThreads).
#pragma once
#include <omp.h>
#include <cstdint>

// below this many elements a call stays on the calling thread (waking threads costs ~µs)
constexpr int64_t kParallelMin = 1 << 15;

inline int threadsFor(int64_t elements) {
  return elements >= kParallelMin ? omp_get_max_threads() : 1;
}

// Runs part(from, to) on contiguous shares of [0, n), one per thread. Shares start at multiples of
// 16 elements (AVX-512's floats), so a vectorised loop leaves its scalar remainder at the end of [0, n)
// alone: the values are the same bits whatever the thread count (GELU's vector erff and its scalar
// one differ in the last bit; each share's tail was scalar).
template <typename Part>
void inShares(int64_t n, Part part) {
#pragma omp parallel num_threads(threadsFor(n))
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const auto start = [&](int64_t k) { return k == threads ? n : (n * k / threads) & ~int64_t{15}; };
    part(start(t), start(t + 1));
  }
}
