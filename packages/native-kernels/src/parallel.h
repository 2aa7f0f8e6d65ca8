// How the elementwise, row and channel kernels share one call among the OpenMP threads (setThreads).
#pragma once
#include <omp.h>
#include <cstdint>

// below this many elements a call stays on the calling thread (waking threads costs ~µs)
constexpr int64_t kParallelMin = 1 << 15;

inline int threadsFor(int64_t elements) {
  return elements >= kParallelMin ? omp_get_max_threads() : 1;
}

// Runs part(from, to) on contiguous shares of [0, n), one per thread.
template <typename Part>
void inShares(int64_t n, Part part) {
#pragma omp parallel num_threads(threadsFor(n))
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    part(n * t / threads, n * (t + 1) / threads);
  }
}
