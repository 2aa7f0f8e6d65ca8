// A 2-D convolution's geometry as tfjs computes it (Conv2DInfo): HWIO filters, NHWC activations
// or, with channelsFirst, NCHW (PyTorch's layout, which oneDNN reads directly).
#pragma once
#include <array>
#include <cstdint>

struct Geometry {
  int64_t n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo, channelsFirst;
  using Key = std::array<int64_t, 16>;
  Key key() const { return {n, h, w, ci, kh, kw, co, sh, sw, dh, dw, padTop, padLeft, ho, wo, channelsFirst}; }
};

// forward (x, filter) → y; input gradient (dy, filter) → dx; filter gradient (x, dy) → dFilter
enum class Pass { Forward, Input, Filter };

void convolve(Pass pass, const Geometry& g, const float* first, const float* second, float* out);
