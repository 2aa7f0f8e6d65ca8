// Fused row kernels of a transformer step, each one pass over rows of the last axis instead of
// the 5–12 tfjs kernels (and temporaries) they replace: layer norm and its gradient, exact-erf
// GELU and its gradient, the ReLU gradient, softmax and its gradient. Row statistics accumulate in double; rows
// are shared among the OpenMP threads (setThreads) when a call is large enough to pay for them.
#include <omp.h>
#include <cmath>
#include <vector>
#include "heap.h"
#include "kernels.h"
#include "parallel.h"
#include "vector-math.h"

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

ROW_KERNEL void layerNormRow(const float* xr, const float* gamma, const float* beta, float* yr, int64_t cols, double eps,
                             float& mean, float& rstd) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < cols; j++) sum += xr[j];
  const double mu = sum / cols;
  double squares = 0;  // two passes: no cancellation when the mean is large against the spread
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < cols; j++) squares += (xr[j] - mu) * (xr[j] - mu);
  const float m = static_cast<float>(mu), s = static_cast<float>(1.0 / std::sqrt(squares / cols + eps));
  for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - m) * s * gamma[j] + beta[j];
  mean = m;
  rstd = s;
}

// one row of LayerNormGrad: dx, and the row's terms of dgamma (pg) and dbeta (pb)
ROW_KERNEL void layerNormGradRow(const float* dyr, const float* xr, float m, float s, const float* gamma, float* dxr,
                                 double* pg, double* pb, int64_t cols) {
  double sumG = 0, sumGX = 0;
#pragma omp simd reduction(+ : sumG, sumGX)
  for (int64_t j = 0; j < cols; j++) {
    const double xhat = (xr[j] - m) * s;
    const double g = static_cast<double>(dyr[j]) * gamma[j];
    sumG += g;
    sumGX += g * xhat;
    pg[j] += dyr[j] * xhat;
    pb[j] += dyr[j];
  }
  const double meanG = sumG / cols, meanGX = sumGX / cols;
  for (int64_t j = 0; j < cols; j++) {
    const double xhat = (xr[j] - m) * s;
    dxr[j] = static_cast<float>(s * (static_cast<double>(dyr[j]) * gamma[j] - meanG - xhat * meanGX));
  }
}

// The exponentials in a loop of their own: with the double sum beside them GCC left expf scalar
// (0.33 G values/s on 8192×32 against 1.0 split, 1 thread; ATen 0.74).
ROW_KERNEL void softmaxRow(const float* xr, float* yr, int64_t cols) {
  float max = -INFINITY;
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < cols; j++) max = xr[j] > max ? xr[j] : max;
#pragma omp simd
  for (int64_t j = 0; j < cols; j++) yr[j] = expf(xr[j] - max);
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < cols; j++) sum += yr[j];
  const float inv = static_cast<float>(1.0 / sum);
#pragma omp simd
  for (int64_t j = 0; j < cols; j++) yr[j] *= inv;
}

ROW_KERNEL void softmaxGradRow(const float* dyr, const float* yr, float* dxr, int64_t cols) {
  double dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < cols; j++) dot += static_cast<double>(dyr[j]) * yr[j];
  const float d = static_cast<float>(dot);
  for (int64_t j = 0; j < cols; j++) dxr[j] = yr[j] * (dyr[j] - d);
}

ROW_KERNEL void geluValues(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * static_cast<float>(kInvSqrt2)));
}

ROW_KERNEL void geluGradValues(const float* dy, const float* x, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    const float cdf = 0.5f * (1.0f + erff(v * static_cast<float>(kInvSqrt2)));
    const float pdf = expf(-0.5f * v * v) * static_cast<float>(kInvSqrt2Pi);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

// dy·step(x) in one pass: NaN in x stays NaN (as tfjs's Step), dy·0 keeps NaN and ±∞ in dy where x ≤ 0
ROW_KERNEL void reluGradValues(const float* dy, const float* x, float* dx, int64_t n) {
#pragma omp simd
  // torch's threshold_backward: 0 where x <= 0 (whatever dy: an inf or NaN gradient stops at a dead unit), dy
  // elsewhere (a NaN x passes dy, as its NaN output does not compare <= 0)
  for (int64_t i = 0; i < n; i++) dx[i] = x[i] <= 0 ? 0.0f : dy[i];
}

}  // namespace

// (heap, x, gamma, beta, y, mean, rstd, rows, cols, eps): y = (x − mean)·rstd·gamma + beta per row
napi_value LayerNorm(napi_env env, napi_callback_info info) {
  Args args(env, info, 10);
  const int64_t rows = args.integer(7), cols = args.integer(8);
  const double eps = args.real(9);
  if (args.failed) return nullptr;
  if (rows < 0 || cols < 1) return throwRange(env, "LayerNorm: bad size");
  const float* x = args.floats(1, rows * cols);
  const float* gamma = args.floats(2, cols);
  const float* beta = args.floats(3, cols);
  float* y = args.floats(4, rows * cols);
  float* mean = args.floats(5, rows);
  float* rstd = args.floats(6, rows);
  if (args.failed) return nullptr;
#pragma omp parallel for num_threads(threadsFor(rows * cols)) schedule(static)
  for (int64_t r = 0; r < rows; r++) layerNormRow(x + r * cols, gamma, beta, y + r * cols, cols, eps, mean[r], rstd[r]);
  return nullptr;
}

// (heap, dy, x, mean, rstd, gamma, dx, dgamma, dbeta, rows, cols):
// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·gamma; dgamma = Σrows dy·x̂, dbeta = Σrows dy
napi_value LayerNormGrad(napi_env env, napi_callback_info info) {
  Args args(env, info, 11);
  const int64_t rows = args.integer(9), cols = args.integer(10);
  if (args.failed) return nullptr;
  if (rows < 0 || cols < 1) return throwRange(env, "LayerNormGrad: bad size");
  const float* dy = args.floats(1, rows * cols);
  const float* x = args.floats(2, rows * cols);
  const float* mean = args.floats(3, rows);
  const float* rstd = args.floats(4, rows);
  const float* gamma = args.floats(5, cols);
  float* dx = args.floats(6, rows * cols);
  float* dgamma = args.floats(7, cols);
  float* dbeta = args.floats(8, cols);
  if (args.failed) return nullptr;
  const int threads = threadsFor(rows * cols);
  // per-thread column partials of dgamma and dbeta, added up at the end
  std::vector<double> partial(static_cast<size_t>(threads) * 2 * cols, 0.0);
#pragma omp parallel num_threads(threads)
  {
    double* pg = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * cols;
    double* pb = pg + cols;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      layerNormGradRow(dy + r * cols, x + r * cols, mean[r], rstd[r], gamma, dx + r * cols, pg, pb, cols);
    }
  }
  for (int64_t j = 0; j < cols; j++) {
    double g = 0, b = 0;
    for (int t = 0; t < threads; t++) {
      g += partial[static_cast<size_t>(t) * 2 * cols + j];
      b += partial[static_cast<size_t>(t) * 2 * cols + cols + j];
    }
    dgamma[j] = static_cast<float>(g);
    dbeta[j] = static_cast<float>(b);
  }
  return nullptr;
}

// (heap, x, y, n): y = x·Φ(x), erf form
napi_value Gelu(napi_env env, napi_callback_info info) {
  Args args(env, info, 4);
  const int64_t n = args.integer(3);
  if (args.failed) return nullptr;
  if (n < 0) return throwRange(env, "Gelu: negative size");
  const float* x = args.floats(1, n);
  float* y = args.floats(2, n);
  if (args.failed) return nullptr;
  inShares(n, [&](int64_t from, int64_t to) { geluValues(x + from, y + from, to - from); });
  return nullptr;
}

// (heap, dy, x, dx, n): dx = dy·(Φ(x) + x·φ(x))
napi_value GeluGrad(napi_env env, napi_callback_info info) {
  Args args(env, info, 5);
  const int64_t n = args.integer(4);
  if (args.failed) return nullptr;
  if (n < 0) return throwRange(env, "GeluGrad: negative size");
  const float* dy = args.floats(1, n);
  const float* x = args.floats(2, n);
  float* dx = args.floats(3, n);
  if (args.failed) return nullptr;
  inShares(n, [&](int64_t from, int64_t to) { geluGradValues(dy + from, x + from, dx + from, to - from); });
  return nullptr;
}

// (heap, dy, x, dx, n): dx = dy·ReLU′(x)
napi_value ReluGrad(napi_env env, napi_callback_info info) {
  Args args(env, info, 5);
  const int64_t n = args.integer(4);
  if (args.failed) return nullptr;
  if (n < 0) return throwRange(env, "ReluGrad: negative size");
  const float* dy = args.floats(1, n);
  const float* x = args.floats(2, n);
  float* dx = args.floats(3, n);
  if (args.failed) return nullptr;
  inShares(n, [&](int64_t from, int64_t to) { reluGradValues(dy + from, x + from, dx + from, to - from); });
  return nullptr;
}

// (heap, x, y, rows, cols): y = exp(x − max) / Σ exp(x − max) per row
napi_value Softmax(napi_env env, napi_callback_info info) {
  Args args(env, info, 5);
  const int64_t rows = args.integer(3), cols = args.integer(4);
  if (args.failed) return nullptr;
  if (rows < 0 || cols < 1) return throwRange(env, "Softmax: bad size");
  const float* x = args.floats(1, rows * cols);
  float* y = args.floats(2, rows * cols);
  if (args.failed) return nullptr;
#pragma omp parallel for num_threads(threadsFor(rows * cols)) schedule(static)
  for (int64_t r = 0; r < rows; r++) softmaxRow(x + r * cols, y + r * cols, cols);
  return nullptr;
}

// (heap, dy, y, dx, rows, cols): dx = y·(dy − Σ dy·y) per row
napi_value SoftmaxGrad(napi_env env, napi_callback_info info) {
  Args args(env, info, 6);
  const int64_t rows = args.integer(4), cols = args.integer(5);
  if (args.failed) return nullptr;
  if (rows < 0 || cols < 1) return throwRange(env, "SoftmaxGrad: bad size");
  const float* dy = args.floats(1, rows * cols);
  const float* y = args.floats(2, rows * cols);
  float* dx = args.floats(3, rows * cols);
  if (args.failed) return nullptr;
#pragma omp parallel for num_threads(threadsFor(rows * cols)) schedule(static)
  for (int64_t r = 0; r < rows; r++) softmaxGradRow(dy + r * cols, y + r * cols, dx + r * cols, cols);
  return nullptr;
}
