// The Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter entry points: arguments checked
// against the heap, then conv-dnnl.cc computes.
#include <algorithm>
#include <string>
#include "conv-geometry.h"
#include "heap.h"
#include "kernels.h"

namespace {

// (heap, first, second, out, n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo, channelsFirst)
bool readGeometry(Args& args, Geometry& g) {
  int64_t* fields[] = {&g.n, &g.h, &g.w, &g.ci, &g.kh, &g.kw, &g.co, &g.sh, &g.sw, &g.dh, &g.dw, &g.padTop, &g.padLeft, &g.ho, &g.wo};
  for (size_t i = 0; i < 15; i++) *fields[i] = args.integer(4 + i);
  g.channelsFirst = args.integer(19) != 0;
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

}  // namespace

napi_value Conv2D(napi_env env, napi_callback_info info) { return run(env, info, Pass::Forward); }
napi_value Conv2DBackpropInput(napi_env env, napi_callback_info info) { return run(env, info, Pass::Input); }
napi_value Conv2DBackpropFilter(napi_env env, napi_callback_info info) { return run(env, info, Pass::Filter); }
