// Memory bandwidth probe for the kernels bench: GB/s reading (a sum) and writing (a fill) a buffer
// of each given size, at 1 and 2 threads (each thread its contiguous half, as gemm.cc's halves), so
// the matmul rows' 2-thread speed-up can be set against what the memory gives a second thread.
//   cc -O3 -march=native -fopenmp stream.c -o stream && ./stream 16777216 1073741824
// prints one JSON object per line: {"bytes":…,"threads":…,"readGBs":…,"writeGBs":…}
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double now(void) { return omp_get_wtime(); }

// GB/s summing (or filling) the buffer, each thread its share, over ≥ 0.2 s: best of 3 rounds after a warm-up
static double rate(float* buffer, size_t floats, int threads, int write) {
  double best = 0;
  volatile float sink = 0;
  for (int round = 0; round < 4; round++) {
    double start = now(), elapsed;
    long passes = 0;
    do {
#pragma omp parallel num_threads(threads)
      {
        const int t = omp_get_thread_num();
        float* share = buffer + floats * t / threads;
        const size_t n = floats * (t + 1) / threads - floats * t / threads;
        if (write) {
          for (size_t i = 0; i < n; i++) share[i] = (float)passes;
        } else {
          float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (size_t i = 0; i + 3 < n; i += 4) {
            s0 += share[i], s1 += share[i + 1], s2 += share[i + 2], s3 += share[i + 3];
          }
          sink += s0 + s1 + s2 + s3;
        }
      }
      passes++;
      elapsed = now() - start;
    } while (elapsed < 0.2);
    const double gbs = (double)floats * 4 * passes / elapsed / 1e9;
    if (round > 0 && gbs > best) best = gbs;  // round 0 warms caches and pages
  }
  return best;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const size_t bytes = strtoull(argv[i], NULL, 10), floats = bytes / 4;
    float* buffer = aligned_alloc(64, (floats * 4 + 63) / 64 * 64);
    if (!buffer) return 1;
    memset(buffer, 0, floats * 4);
    for (int threads = 1; threads <= 2; threads++) {
      const double read = rate(buffer, floats, threads, 0), written = rate(buffer, floats, threads, 1);
      printf("{\"bytes\":%zu,\"threads\":%d,\"readGBs\":%.2f,\"writeGBs\":%.2f}\n", bytes, threads, read, written);
    }
    free(buffer);
  }
  return 0;
}
