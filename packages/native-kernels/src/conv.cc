// The Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter entry points: arguments checked
// against the heap, then conv-dnnl.cc computes.
#include <vector>
#include <algorithm>
#include <string>
#include <utility>
#include "conv-geometry.h"
#include "heap.h"
#include "kernels.h"

namespace {

// (heap, first, second, out, n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo, channelsFirst):
// the geometry from argument `at` (4 here)
bool readGeometry(Args& args, Geometry& g, size_t at = 4) {
  int64_t* fields[] = {&g.n, &g.h, &g.w, &g.ci, &g.kh, &g.kw, &g.co, &g.sh, &g.sw, &g.dh, &g.dw, &g.padTop, &g.padLeft, &g.ho, &g.wo};
  for (size_t i = 0; i < 15; i++) *fields[i] = args.integer(at + i);
  g.channelsFirst = args.integer(at + 15) != 0;
  if (args.failed) return false;
  for (size_t i = 0; i < 15; i++) {
    if (*fields[i] < (i >= 7 && i < 11 ? 1 : 0)) {
      args.fail("conv2d: sizes and paddings must be ≥ 0, strides and dilations ≥ 1");
      return false;
    }
  }
  return true;
}

napi_value run(napi_env env, napi_callback_info info, Pass pass) {
  Args args(env, info, 20);
  Geometry g{};
  if (!readGeometry(args, g)) return nullptr;
  const int64_t xSize = g.n * g.h * g.w * g.ci, wSize = g.kh * g.kw * g.ci * g.co, ySize = g.n * g.ho * g.wo * g.co;
  const int64_t sizes[3][3] = {{xSize, wSize, ySize}, {ySize, wSize, xSize}, {xSize, ySize, wSize}};
  const int64_t* s = sizes[static_cast<int>(pass)];
  const float* first = args.floats(1, s[0]);
  const float* second = args.floats(2, s[1]);
  float* out = args.floats(3, s[2]);
  if (args.failed) return nullptr;
  if (s[0] == 0 || s[1] == 0 || s[2] == 0) {
    std::fill(out, out + s[2], 0.0f);
    return nullptr;
  }
  try {
    convolve(pass, g, first, second, out);
  } catch (const std::exception& e) {  // dnnl::error, std::bad_alloc
    return throwRange(env, std::string("conv2d: ") + e.what());
  }
  return nullptr;
}

// float32 pointer at argument i, or null when it is -1 (an optional tensor left out)
float* optional(Args& args, size_t i, int64_t count) {
  if (args.integer(i) == -1 && !args.failed) return nullptr;
  return args.floats(i, count);
}

}  // namespace

// (heap, x, weight, bias | -1, y, xToken, ...geometry): OIHW weights, y = conv(x, weight) + bias
napi_value ConvForward(napi_env env, napi_callback_info info) {
  Args args(env, info, 22);
  Geometry g{};
  const int64_t xToken = args.integer(5);
  if (!readGeometry(args, g, 6)) return nullptr;
  g.oihw = 1;
  const float* x = args.floats(1, g.n * g.h * g.w * g.ci);
  const float* weight = args.floats(2, g.kh * g.kw * g.ci * g.co);
  const float* bias = optional(args, 3, g.co);
  float* y = args.floats(4, g.n * g.ho * g.wo * g.co);
  if (args.failed) return nullptr;
  g.bias = bias != nullptr;
  const int64_t ySize = g.n * g.ho * g.wo * g.co, plane = g.channelsFirst ? g.ho * g.wo : 1;
  if (g.n * g.h * g.w * g.ci == 0 || g.kh * g.kw * g.ci * g.co == 0) {  // a sum over nothing: the bias alone
    for (int64_t i = 0; i < ySize; i++) y[i] = bias ? bias[(i / plane) % g.co] : 0.0f;
    return nullptr;
  }
  try {
    convolveForward(g, x, weight, bias, y, xToken);
  } catch (const std::exception& e) {
    return throwRange(env, std::string("conv2d: ") + e.what());
  }
  return nullptr;
}

// (heap, x, weight, dy, dx | -1, dWeight, dBias | -1, xToken, ...geometry): OIHW weights, both gradients
// (and the bias's) in one call, dy reordered once
napi_value ConvBackward(napi_env env, napi_callback_info info) {
  Args args(env, info, 24);
  Geometry g{};
  const int64_t xToken = args.integer(7);
  if (!readGeometry(args, g, 8)) return nullptr;
  g.oihw = 1;
  const int64_t xSize = g.n * g.h * g.w * g.ci, wSize = g.kh * g.kw * g.ci * g.co, ySize = g.n * g.ho * g.wo * g.co;
  const float* x = args.floats(1, xSize);
  const float* weight = args.floats(2, wSize);
  const float* dy = args.floats(3, ySize);
  float* dx = optional(args, 4, xSize);
  float* dWeight = args.floats(5, wSize);
  float* dBias = optional(args, 6, g.co);
  if (args.failed) return nullptr;
  g.bias = dBias != nullptr;
  if (xSize == 0 || ySize == 0 || wSize == 0) {  // sums over nothing: zero gradients, but the bias's
    for (auto [p, size] : {std::pair{dx, xSize}, std::pair{dWeight, wSize}}) {
      if (p) std::fill(p, p + size, 0.0f);
    }
    // no input channels still gives outputs (the bias alone): its gradient sums dy per channel
    if (dBias) {
      const int64_t plane = g.channelsFirst ? g.ho * g.wo : 1;
      std::vector<double> sums(g.co, 0.0);
      for (int64_t i = 0; i < ySize; i++) sums[(i / plane) % g.co] += dy[i];
      for (int64_t c = 0; c < g.co; c++) dBias[c] = static_cast<float>(sums[c]);
    }
    return nullptr;
  }
  try {
    convolveBackward(g, x, weight, dy, dx, dWeight, dBias, xToken);
  } catch (const std::exception& e) {
    return throwRange(env, std::string("conv2d: ") + e.what());
  }
  return nullptr;
}

napi_value Conv2D(napi_env env, napi_callback_info info) { return run(env, info, Pass::Forward); }
napi_value Conv2DBackpropInput(napi_env env, napi_callback_info info) { return run(env, info, Pass::Input); }
napi_value Conv2DBackpropFilter(napi_env env, napi_callback_info info) { return run(env, info, Pass::Filter); }
