#pragma once
// A rendered tile as it travels from a worker back to the job's consumer:
//
//   offset  size  field
//        0     4  magic "RSTL"
//        4     1  version, 1
//        5     1  pixel encoding, 1 = PNG (8-bit RGB, no alpha)
//        6     2  reserved, 0
//        8     4  x   the rendered rect in the whole image (Tile::rendered):
//       12     4  y   column, row, width, height, each unsigned little-endian
//       16     4  w
//       20     4  h
//       24     4  n, the PNG's length in bytes, unsigned little-endian
//       28     n  a PNG file of exactly w x h pixels
//
// Nothing may follow the PNG. PNG is lossless, so the consumer stitches the
// very pixels the worker rendered (and replicas compare bit for bit), and
// compressed: the example scenes at 4 spp take 1.3 to 2.5 bytes a pixel
// against 3 raw, less noisy renders less. The decoder bounds w and h by
// kMaxWireTileSide and n by kMaxWireTileBytes before allocating, and checks
// the PNG's size against the header.

#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "pool/render/image.hpp"
#include "pool/render/render.hpp"

namespace runsnack::render {

inline constexpr int kMaxWireTileSide = 4096;  // kMaxTileSide plus twice kMaxOverlap fits
inline constexpr std::size_t kMaxWireTileBytes = 64u << 20;
inline constexpr std::size_t kTileWireHeaderBytes = 28;

struct TileResult {
  TileRect rect;  // where `pixels` belong in the whole image
  RgbImage pixels;
};

// `invalid_argument` if the pixels are not rect.w x rect.h, a side exceeds
// kMaxWireTileSide or the rect has a negative corner.
Result<std::string> encode_tile_result(TileRect rect, const RgbImage& pixels);

// `malformed` for a bad header, trailing bytes or a PNG that does not match,
// `too_large` over the bounds above, `unsupported` for another version or
// encoding. The caller checks that `rect` is the one it asked for.
Result<TileResult> decode_tile_result(std::string_view bytes);

}  // namespace runsnack::render
