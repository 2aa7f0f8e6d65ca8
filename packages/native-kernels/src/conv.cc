// Conv2D and its two gradients (NHWC activations, HWIO filters, as tfjs) as im2col + sgemm:
// the patches of a chunk of images become rows of `cols` [rows, kh·kw·ci], so that
//   forward:       y[rows, co]  = cols · W[kh·kw·ci, co]
//   input grad:    dcols        = dy[rows, co] · Wᵀ, scattered back onto dx (col2im)
//   filter grad:   dW          += colsᵀ · dy
// A 1×1 stride-1 unpadded convolution uses x itself as cols.
#include <algorithm>
#include <cstring>
#include <vector>
#include "heap.h"
#include "kernels.h"

namespace {

struct Geometry {
  int64_t n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo;
  int64_t patch() const { return kh * kw * ci; }
  int64_t pixelsOut() const { return ho * wo; }
  bool identity() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && padTop == 0 && padLeft == 0 && ho == h && wo == w; }
  // images per chunk: cols stays under 32 MiB
  int64_t chunk() const { return std::max<int64_t>(1, (int64_t{8} << 20) / std::max<int64_t>(1, pixelsOut() * patch())); }
};

// (heap, first, second, out, n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo)
bool readGeometry(Args& args, Geometry& g) {
  int64_t* fields[] = {&g.n, &g.h, &g.w, &g.ci, &g.kh, &g.kw, &g.co, &g.sh, &g.sw, &g.dh, &g.dw, &g.padTop, &g.padLeft, &g.ho, &g.wo};
  for (size_t i = 0; i < 15; i++) *fields[i] = args.integer(4 + i);
  if (args.failed) return false;
  for (size_t i = 0; i < 11; i++) {
    if (*fields[i] < (i < 7 ? 0 : 1)) {
      args.fail("conv2d: sizes must be ≥ 0 and strides, dilations ≥ 1");
      return false;
    }
  }
  if (g.padTop < 0 || g.padLeft < 0 || g.ho < 0 || g.wo < 0) {
    args.fail("conv2d: negative padding or output size");
    return false;
  }
  return true;
}

void im2col(const Geometry& g, const float* x, int64_t first, int64_t count, float* cols) {
  const int64_t ci = g.ci;
  for (int64_t img = first; img < first + count; img++) {
    const float* xi = x + img * g.h * g.w * ci;
    for (int64_t oy = 0; oy < g.ho; oy++) {
      for (int64_t ox = 0; ox < g.wo; ox++) {
        for (int64_t ky = 0; ky < g.kh; ky++) {
          const int64_t iy = oy * g.sh - g.padTop + ky * g.dh;
          for (int64_t kx = 0; kx < g.kw; kx++, cols += ci) {
            const int64_t ix = ox * g.sw - g.padLeft + kx * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) std::memset(cols, 0, ci * sizeof(float));
            else std::memcpy(cols, xi + (iy * g.w + ix) * ci, ci * sizeof(float));
          }
        }
      }
    }
  }
}

void col2im(const Geometry& g, const float* cols, int64_t first, int64_t count, float* dx) {
  const int64_t ci = g.ci;
  for (int64_t img = first; img < first + count; img++) {
    float* di = dx + img * g.h * g.w * ci;
    for (int64_t oy = 0; oy < g.ho; oy++) {
      for (int64_t ox = 0; ox < g.wo; ox++) {
        for (int64_t ky = 0; ky < g.kh; ky++) {
          const int64_t iy = oy * g.sh - g.padTop + ky * g.dh;
          for (int64_t kx = 0; kx < g.kw; kx++, cols += ci) {
            const int64_t ix = ox * g.sw - g.padLeft + kx * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            float* d = di + (iy * g.w + ix) * ci;
            for (int64_t c = 0; c < ci; c++) d[c] += cols[c];
          }
        }
      }
    }
  }
}

enum class Pass { Forward, Input, Filter };

napi_value run(napi_env env, napi_callback_info info, Pass pass) {
  Args args(env, info, 19);
  Geometry g{};
  if (!readGeometry(args, g)) return nullptr;
  const int64_t xSize = g.n * g.h * g.w * g.ci, wSize = g.patch() * g.co, ySize = g.n * g.pixelsOut() * g.co;
  // inputs and output per pass: forward (x, w) → y; input grad (dy, w) → dx; filter grad (x, dy) → dw
  const int64_t sizes[3][3] = {{xSize, wSize, ySize}, {ySize, wSize, xSize}, {xSize, ySize, wSize}};
  const int64_t* s = sizes[static_cast<int>(pass)];
  const float* first = args.floats(1, s[0]);
  const float* second = args.floats(2, s[1]);
  float* out = args.floats(3, s[2]);
  if (args.failed) return nullptr;
  if (pass != Pass::Forward) std::fill(out, out + s[2], 0.0f);
  if (g.n == 0 || g.pixelsOut() == 0 || g.co == 0 || g.patch() == 0) {
    std::fill(out, out + s[2], 0.0f);
    return nullptr;
  }
  const bool identity = g.identity();
  const int64_t chunk = identity ? g.n : g.chunk();
  std::vector<float> cols(identity ? 0 : chunk * g.pixelsOut() * g.patch());
  for (int64_t img = 0; img < g.n; img += chunk) {
    const int64_t count = std::min(chunk, g.n - img);
    const int rows = static_cast<int>(count * g.pixelsOut());
    const int patch = static_cast<int>(g.patch()), co = static_cast<int>(g.co);
    if (pass == Pass::Forward) {
      const float* c = identity ? first : cols.data();
      if (!identity) im2col(g, first, img, count, cols.data());
      sgemm(false, false, rows, co, patch, c, second, 0.0f, out + img * g.pixelsOut() * g.co);
    } else if (pass == Pass::Input) {
      float* target = identity ? out : cols.data();
      sgemm(false, true, rows, patch, co, first + img * g.pixelsOut() * g.co, second, 0.0f, target);
      if (!identity) col2im(g, cols.data(), img, count, out);
    } else {
      const float* c = identity ? first : cols.data();
      if (!identity) im2col(g, first, img, count, cols.data());
      sgemm(true, false, patch, co, rows, c, second + img * g.pixelsOut() * g.co, img == 0 ? 0.0f : 1.0f, out);
    }
  }
  return nullptr;
}

}  // namespace

napi_value Conv2D(napi_env env, napi_callback_info info) { return run(env, info, Pass::Forward); }
napi_value Conv2DBackpropInput(napi_env env, napi_callback_info info) { return run(env, info, Pass::Input); }
napi_value Conv2DBackpropFilter(napi_env env, napi_callback_info info) { return run(env, info, Pass::Filter); }
