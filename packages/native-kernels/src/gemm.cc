// BatchMatMul straight on the wasm heap: C[i] = op(A[i])·op(B[i]) through an sgemm call,
// transposes folded into the call (no transposed copies). At one thread oneDNN's sgemm runs products
// of at least kOneDNNMin multiply-adds, OpenBLAS's (the library PyTorch calls) the rest and every
// product at more threads. Measured on this project's AVX-512 host (CPU time, 1 thread, rounds
// alternating, same aligned buffers): oneDNN's JIT kernels 1.07–1.59× OpenBLAS's SkylakeX ones on all
// 18 Linear products of the DDP bench, the CLIP model and the transformer (forward, dy·W, dyᵀ·x;
// 1.5× on the store-bound dyᵀ·x of 32-row layers), 1.2–1.3× on attention-sized 64×64×16 to
// 256×64×64, but 0.5–0.9× below 2^16 multiply-adds (32×16×32), where its per-call work dominates.
// The 2-thread comparison was not measurable on the shared host: OpenBLAS kept there.
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include "heap.h"
#include "kernels.h"

namespace {

constexpr int64_t kOneDNNMin = 1 << 16;

// row-major C[m, n] = op(A)·op(B) + beta·C, dense matrices
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta,
           float* c) {
  const int64_t lda = transA ? m : k, ldb = transB ? k : n;
  if (omp_get_max_threads() == 1 && m * n * k >= kOneDNNMin &&
      dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, n) == dnnl_success) {
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(n));
}

}  // namespace

// (heap, a, b, c, batch, m, n, k, transA, transB, batchStrideA, batchStrideB): offsets in bytes,
// strides in elements (0 repeats one matrix for every batch: tfjs's broadcast of a batch of 1).
napi_value BatchMatMul(napi_env env, napi_callback_info info) {
  Args args(env, info, 12);
  const int64_t batch = args.integer(4), m = args.integer(5), n = args.integer(6), k = args.integer(7);
  const bool transA = args.integer(8) != 0, transB = args.integer(9) != 0;
  const int64_t strideA = args.integer(10), strideB = args.integer(11);
  if (args.failed) return nullptr;
  if (batch < 1 || m < 0 || n < 0 || k < 0 || strideA < 0 || strideB < 0) {
    return throwRange(env, "BatchMatMul: negative size or stride");
  }
  const float* a = args.floats(1, (batch - 1) * strideA + m * k);
  const float* b = args.floats(2, (batch - 1) * strideB + k * n);
  float* c = args.floats(3, batch * m * n);
  if (args.failed) return nullptr;
  if (m == 0 || n == 0) return nullptr;
  if (k == 0) {
    for (int64_t i = 0; i < batch * m * n; i++) c[i] = 0;
    return nullptr;
  }
  // a batch of A rows against one B is one taller product
  if (strideB == 0 && !transA && strideA == m * k) {
    sgemm(false, transB, batch * m, n, k, a, b, 0.0f, c);
    return nullptr;
  }
  for (int64_t i = 0; i < batch; i++) {
    sgemm(transA, transB, m, n, k, a + i * strideA, b + i * strideB, 0.0f, c + i * m * n);
  }
  return nullptr;
}
