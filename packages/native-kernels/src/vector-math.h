// Vectorized elementwise loops without machine-specific build flags: ROW_KERNEL compiles a
// function for AVX-512, AVX2 and baseline x86-64, chosen at load (GCC's ifunc dispatch); the
// build targets baseline x86-64, whose SSE2 loops ran 2–5× behind ATen's. expf and erff are
// declared SIMD so `#pragma omp simd` loops call glibc's vector versions (libmvec, ≤ 2 ulp),
// which math.h declares only under -ffast-math.
#pragma once
#include <cmath>
#include <features.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define ROW_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
extern "C" {
#pragma omp declare simd notinbranch
float expf(float);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)  // libmvec's erff is newer than its expf
#pragma omp declare simd notinbranch
float erff(float);
#endif
}
#else
#define ROW_KERNEL
#endif
