// BatchMatMul straight on the wasm heap: C[i] = op(A[i])·op(B[i]) through cblas_sgemm,
// transposes folded into the call (no transposed copies).
#include <cblas.h>
#include "heap.h"
#include "kernels.h"

namespace {

// row-major C[m, n] = op(A)·op(B) + beta·C, dense matrices
void sgemm(bool transA, bool transB, int m, int n, int k, const float* a, const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
              a, transA ? m : k, b, transB ? k : n, beta, c, n);
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
    sgemm(false, transB, static_cast<int>(batch * m), n, k, a, b, 0.0f, c);
    return nullptr;
  }
  for (int64_t i = 0; i < batch; i++) {
    sgemm(transA, transB, m, n, k, a + i * strideA, b + i * strideB, 0.0f, c + i * m * n);
  }
  return nullptr;
}
