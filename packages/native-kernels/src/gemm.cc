// BatchMatMul straight on the wasm heap: C[i] = op(A[i])·op(B[i]) through an sgemm call,
// transposes folded into the call (no transposed copies). Which library, measured on this
// project's AVX-512 host:
// - one thread, from kOneDNNMin multiply-adds: oneDNN's sgemm. Its JIT kernels took 1.07–1.59× less
//   CPU time than OpenBLAS's SkylakeX ones on all 18 Linear products of the DDP bench, the CLIP model
//   and the transformer (forward, dy·W, dyᵀ·x; 1.5× on the store-bound dyᵀ·x of 32-row layers) and
//   1.2–1.3× on attention-sized ones, but 0.5–0.9× below 2^16 multiply-adds, where its per-call work
//   dominates (1 thread, rounds alternating, same aligned buffers; README).
// - more threads, below kOneThreadMax: oneDNN's sgemm on one thread. OpenBLAS's threads did not pay
//   there (idle host, 2 threads ÷ 1: 0.59–0.83× on the CLIP text MLP's 2 M multiply-adds, 0.90–1.13×
//   on the transformer MLP's 4 M), and one oneDNN thread beats one OpenBLAS thread.
// - otherwise OpenBLAS's, the library PyTorch calls (1.5–1.9× from a second thread on CLIP's
//   imageProj, 51 M multiply-adds, and the DDP bench's 67–134 M).
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include "heap.h"
#include "kernels.h"

namespace {

constexpr int64_t kOneDNNMin = 1 << 16;
constexpr int64_t kOneThreadMax = 1 << 23;

// row-major C[m, n] = op(A)·op(B) + beta·C, dense matrices
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta,
           float* c) {
  const int64_t lda = transA ? m : k, ldb = transB ? k : n;
  const int64_t macs = m * n * k;
  const int threads = omp_get_max_threads();
  if (macs >= kOneDNNMin && (threads == 1 || macs < kOneThreadMax)) {
    if (threads > 1) omp_set_num_threads(1);  // this thread's OpenMP setting, read by dnnl_sgemm per call
    const dnnl_status_t status =
        dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, n);
    if (threads > 1) omp_set_num_threads(threads);
    if (status == dnnl_success) return;
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
