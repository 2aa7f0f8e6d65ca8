// Conv2D and its two gradients as im2col + sgemm: the patches of a chunk of images become
// rows of `cols` [rows, kh·kw·ci], so that
//   forward:      y[rows, co] = cols · W[kh·kw·ci, co]
//   input grad:   dcols       = dy[rows, co] · Wᵀ, scattered back onto dx (col2im)
//   filter grad:  dW         += colsᵀ · dy
// A 1×1 stride-1 unpadded convolution uses x itself as cols. Measured against oneDNN 2.6's
// convolutions on tfjs's NHWC/HWIO layouts (no reorders) for the CLIP model's two convolutions:
// as fast forward and for the filter gradient, 8–80× faster for the input gradient.
#include <algorithm>
#include <cstring>
#include <vector>
#include "conv-geometry.h"
#include "kernels.h"

namespace {

int64_t patchOf(const Geometry& g) { return g.kh * g.kw * g.ci; }

void im2col(const Geometry& g, const float* x, int64_t first, int64_t count, float* cols) {
  const int64_t ci = g.ci, row = g.kw * ci;
  for (int64_t img = first; img < first + count; img++) {
    const float* xi = x + img * g.h * g.w * ci;
    for (int64_t oy = 0; oy < g.ho; oy++) {
      for (int64_t ox = 0; ox < g.wo; ox++) {
        const int64_t ix0 = ox * g.sw - g.padLeft;
        // undilated and inside the image's width: a filter row is one contiguous run of x
        const bool run = g.dw == 1 && ix0 >= 0 && ix0 + g.kw <= g.w;
        for (int64_t ky = 0; ky < g.kh; ky++) {
          const int64_t iy = oy * g.sh - g.padTop + ky * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::memset(cols, 0, row * sizeof(float));
            cols += row;
          } else if (run) {
            std::memcpy(cols, xi + (iy * g.w + ix0) * ci, row * sizeof(float));
            cols += row;
          } else {
            for (int64_t kx = 0; kx < g.kw; kx++, cols += ci) {
              const int64_t ix = ix0 + kx * g.dw;
              if (ix < 0 || ix >= g.w) std::memset(cols, 0, ci * sizeof(float));
              else std::memcpy(cols, xi + (iy * g.w + ix) * ci, ci * sizeof(float));
            }
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

}

void convolve(Pass pass, const Geometry& g, const float* first, const float* second, float* out) {
  const int64_t pixelsOut = g.ho * g.wo, patch = patchOf(g);
  if (pass == Pass::Input) std::fill(out, out + g.n * g.h * g.w * g.ci, 0.0f);  // col2im adds
  const bool identity = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.padTop == 0 && g.padLeft == 0 && g.ho == g.h && g.wo == g.w;
  // images per chunk: cols stays under 32 MiB
  const int64_t chunk = identity ? g.n : std::max<int64_t>(1, (int64_t{8} << 20) / std::max<int64_t>(1, pixelsOut * patch));
  std::vector<float> cols(identity ? 0 : chunk * pixelsOut * patch);
  for (int64_t img = 0; img < g.n; img += chunk) {
    const int64_t count = std::min(chunk, g.n - img);
    const int rows = static_cast<int>(count * pixelsOut), k = static_cast<int>(patch), co = static_cast<int>(g.co);
    const int64_t yAt = img * pixelsOut * g.co;
    if (pass == Pass::Input) {
      sgemm(false, true, rows, k, co, first + yAt, second, 0.0f, identity ? out : cols.data());
      if (!identity) col2im(g, cols.data(), img, count, out);
      continue;
    }
    if (!identity) im2col(g, first, img, count, cols.data());
    const float* c = identity ? first : cols.data();
    if (pass == Pass::Forward) sgemm(false, false, rows, co, k, c, second, 0.0f, out + yAt);
    else sgemm(true, false, k, co, rows, c, second + yAt, img == 0 ? 0.0f : 1.0f, out);
  }
}
