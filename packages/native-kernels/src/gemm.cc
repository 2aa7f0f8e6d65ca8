// BatchMatMul straight on the wasm heap: C[i] = op(A[i])·op(B[i]) through an sgemm call,
// transposes folded into the call (no transposed copies). Which library, measured on this
// project's AVX-512 host:
// - one thread, from kOneDNNMin multiply-adds: oneDNN's sgemm. Its JIT kernels took 1.07–1.59× less
//   CPU time than OpenBLAS's SkylakeX ones on all 18 Linear products of the DDP bench, the CLIP model
//   and the transformer (forward, dy·W, dyᵀ·x; 1.5× on the store-bound dyᵀ·x of 32-row layers) and
//   1.2–1.3× on attention-sized ones, but 0.5–0.9× below 2^16 multiply-adds, where its per-call work
//   dominates (1 thread, rounds alternating, same aligned buffers; README).
// - two threads, from kTwoHalvesMin: the product cut in two halves of the output (columns, or rows
//   when they are more), each run by that 1-thread oneDNN kernel, one on the calling thread and one
//   on a warm worker (half-worker.h). OpenBLAS's threads ran the DDP bench's dyᵀ·x at 0.84× of one
//   oneDNN thread (idle host) and oneDNN's own OpenMP threads fell to 0.1–0.5× on some shapes when the
//   host was busy, while the halves ran the DDP bench's products at 1.6–1.9× and the CLIP text and
//   transformer MLPs' 2–4 M multiply-adds (10–50 µs) at 1.5–1.7× of one thread (idle host; `pnpm
//   bench kernels`), where PyTorch's own two threads gave 0.5–1.4×. Below 2^21 a half lasts about as
//   long as the hand-off.
// - below kOneThreadMax at more threads: that one oneDNN thread.
// - more threads, from kOneThreadMax: OpenBLAS's, the library PyTorch calls.
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <algorithm>
#include <utility>
#include "half-worker.h"
#include "heap.h"
#include "kernels.h"
#include "signal-guard.h"

namespace {

constexpr int64_t kOneDNNMin = 1 << 16;
constexpr int64_t kOneThreadMax = 1 << 23;
constexpr int64_t kTwoHalvesMin = 1 << 21;
// a half's first output column or row on a 64-byte boundary (16 floats), as the output buffer is
constexpr int64_t kHalfAlign = 16;

struct Product {
  bool transA, transB;
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
};

// C = op(A)·op(B) by oneDNN's sgemm on the calling thread alone; false when it refused the call
bool oneThread(const Product& p) {
  AsyncSignalsBlocked quiet;  // signal-guard.h: oneDNN's kernels and signal handlers do not mix
  const int threads = omp_get_max_threads();
  if (threads > 1) omp_set_num_threads(1);  // this thread's OpenMP setting, read by dnnl_sgemm per call
  const dnnl_status_t status = dnnl_sgemm(p.transA ? 'T' : 'N', p.transB ? 'T' : 'N', p.m, p.n, p.k, 1.0f, p.a, p.lda,
                                          p.b, p.ldb, 0.0f, p.c, p.ldc);
  if (threads > 1) omp_set_num_threads(threads);
  return status == dnnl_success;
}

// The two halves of p's output, cut across its longer side so each half reads half of the larger operand.
std::pair<Product, Product> halves(const Product& p) {
  Product first = p, second = p;
  if (p.n >= p.m) {
    const int64_t cut = (p.n / 2 + kHalfAlign / 2) / kHalfAlign * kHalfAlign;
    first.n = cut;
    second.n = p.n - cut;
    second.b = p.transB ? p.b + cut * p.ldb : p.b + cut;
    second.c = p.c + cut;
  } else {
    const int64_t cut = (p.m / 2 + kHalfAlign / 2) / kHalfAlign * kHalfAlign;
    first.m = cut;
    second.m = p.m - cut;
    second.a = p.transA ? p.a + cut : p.a + cut * p.lda;
    second.c = p.c + cut * p.ldc;
  }
  return {first, second};
}

// the halves on this thread and the worker; false when the worker was taken or oneDNN refused a half
bool twoThreads(const Product& p) {
  const auto [first, second] = halves(p);
  bool firstDone = false, secondDone = false;
  const bool ran = runHalves([&] { firstDone = oneThread(first); }, [&] { secondDone = oneThread(second); });
  return ran && firstDone && secondDone;
}

// row-major C[m, n] = op(A)·op(B), dense matrices; C is only written (a half that failed is redone whole)
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  const Product p{transA, transB, m, n, k, a, transA ? m : k, b, transB ? k : n, c, n};
  const int64_t macs = m * n * k;
  const int threads = omp_get_max_threads();
  if (threads == 2 && macs >= kTwoHalvesMin && std::max(m, n) >= 2 * kHalfAlign && twoThreads(p)) return;
  if (macs >= kOneDNNMin && (threads <= 2 || macs < kOneThreadMax) && oneThread(p)) return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(p.lda), b,
              static_cast<int>(p.ldb), 0.0f, c, static_cast<int>(n));
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
    sgemm(false, transB, batch * m, n, k, a, b, c);
    return nullptr;
  }
  for (int64_t i = 0; i < batch; i++) {
    sgemm(transA, transB, m, n, k, a + i * strideA, b + i * strideB, c + i * m * n);
  }
  return nullptr;
}
