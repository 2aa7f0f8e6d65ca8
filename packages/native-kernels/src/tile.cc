// Tile (tf.tile, and tf.broadcastTo through it): each dimension's block is built once from the
// input and then copied reps times, so the work is memcpy of whole inner blocks.
#include <cstring>
#include <vector>
#include "heap.h"
#include "kernels.h"

namespace {

struct Tiling {
  std::vector<int64_t> shape, reps, inStride, outStride;  // strides in bytes
  int64_t elementBytes;
};

// Writes the tiled block of dimension d at out from the input block at in.
void tileDim(const Tiling& t, size_t d, const uint8_t* in, uint8_t* out) {
  const int64_t block = t.shape[d] * t.outStride[d];
  if (d + 1 == t.shape.size()) std::memcpy(out, in, t.shape[d] * t.elementBytes);
  else for (int64_t i = 0; i < t.shape[d]; i++) tileDim(t, d + 1, in + i * t.inStride[d], out + i * t.outStride[d]);
  for (int64_t r = 1; r < t.reps[d]; r++) std::memcpy(out + r * block, out, block);
}

}  // namespace

// (heap, x, out, elementBytes, rank, ...shape, ...reps): elementBytes 1 (bool) or 4
napi_value Tile(napi_env env, napi_callback_info info) {
  Args args(env, info, 5);
  const int64_t elementBytes = args.integer(3), rank = args.integer(4);
  if (args.failed) return nullptr;
  if ((elementBytes != 1 && elementBytes != 4) || rank < 1 || rank > 9 || args.argc < static_cast<size_t>(5 + 2 * rank)) {
    return throwRange(env, "Tile: elementBytes must be 1 or 4 and rank 1..9 with a shape and reps each");
  }
  Tiling t{std::vector<int64_t>(rank), std::vector<int64_t>(rank), std::vector<int64_t>(rank), std::vector<int64_t>(rank), elementBytes};
  int64_t inSize = 1, outSize = 1;
  for (int64_t d = 0; d < rank; d++) {
    t.shape[d] = args.integer(5 + d);
    t.reps[d] = args.integer(5 + rank + d);
    if (t.shape[d] < 0 || t.reps[d] < 0) return throwRange(env, "Tile: negative size");
    inSize *= t.shape[d];
    outSize *= t.shape[d] * t.reps[d];
  }
  if (args.failed) return nullptr;
  // floats() counts 4-byte elements: check the byte extents in those units, rounded up
  const uint8_t* x = reinterpret_cast<const uint8_t*>(args.floats(1, (inSize * elementBytes + 3) / 4));
  uint8_t* out = reinterpret_cast<uint8_t*>(args.floats(2, (outSize * elementBytes + 3) / 4));
  if (args.failed || outSize == 0) return nullptr;
  int64_t in = elementBytes, o = elementBytes;
  for (int64_t d = rank - 1; d >= 0; d--) {
    t.inStride[d] = in;
    t.outStride[d] = o;
    in *= t.shape[d];
    o *= t.shape[d] * t.reps[d];
  }
  tileDim(t, 0, x, out);
  return nullptr;
}
