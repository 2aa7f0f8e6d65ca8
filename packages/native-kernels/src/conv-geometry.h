// A 2-D convolution's geometry as tfjs computes it (Conv2DInfo): HWIO filters, NHWC activations
// or, with channelsFirst, NCHW (PyTorch's layout, which oneDNN reads directly); with oihw the
// weights are PyTorch's OIHW, and with bias the forward adds one and the filter pass also sums
// its gradient (as ATen's oneDNN convolutions: no separate passes over the output).
#pragma once
#include <array>
#include <cstdint>

struct Geometry {
  int64_t n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo, channelsFirst;
  int64_t oihw = 0, bias = 0;
  using Key = std::array<int64_t, 18>;
  Key key() const {
    return {n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo, channelsFirst, oihw, bias};
  }
};

// forward (x, filter[, bias]) → y; input gradient (dy, filter) → dx; filter gradient (x, dy) → dFilter[, dBias]
enum class Pass { Forward, Input, Filter };

void convolve(Pass pass, const Geometry& g, const float* first, const float* second, float* out);
// y = conv(x, filter) + bias (bias may be null). xToken: the caller's name for x's data (-1: none),
// unique while that data lives, so that the backward can tell its reorder of x is still in the buffer.
void convolveForward(const Geometry& g, const float* x, const float* filter, const float* bias, float* y,
                     int64_t xToken);
// dx (may be null: not computed), dFilter and dBias (null where g.bias is 0) from x, filter and dy,
// dy reordered once for both passes, x not again where the forward's reorder of the same xToken is still there
void convolveBackward(const Geometry& g, const float* x, const float* filter, const float* dy, float* dx, float* dFilter,
                      float* dBias, int64_t xToken);
