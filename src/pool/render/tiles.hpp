#pragma once
// Splitting an image into tiles with an overlap border, and stitching the
// rendered tiles back with a linear blend across each border.
//
// Tiles form a grid of `tile` x `tile` cores (the last row and column may be
// smaller). Each tile is rendered over its core grown by `overlap` pixels on
// every side, clamped to the image. Where tiles overlap, each pixel is the
// weighted mean of the tiles covering it; a tile's weight falls linearly
// towards its rendered edges that lie inside the image (per axis: 2d + 1 at
// d pixels from the edge, capped at 4 * overlap; the 2-D weight is the
// product). The mean is taken in integers with rounding, so tiles that agree
// on a pixel give exactly that pixel: CPU tiles stitch to the whole render
// bit for bit, and tiles from different devices blend without a seam.

#include <span>
#include <vector>

#include "core/error.hpp"
#include "pool/render/image.hpp"
#include "pool/render/render.hpp"

namespace runsnack::render {

inline constexpr int kMinTileSide = 16;
inline constexpr int kMaxTileSide = 2048;
inline constexpr int kMaxOverlap = 64;

struct Tile {
  int index = 0;      // row-major position in the grid, 0 .. tiles - 1
  TileRect core;      // the pixels this tile owns
  TileRect rendered;  // core grown by the overlap, clamped to the image: what a worker renders
};

// The grid, in index order. `invalid_argument` unless width and height are
// in [1, kMaxImageSide], tile in [kMinTileSide, kMaxTileSide] and overlap in
// [0, min(kMaxOverlap, tile / 2)] (so at most 2 x 2 tiles cover a pixel).
Result<std::vector<Tile>> split_tiles(int width, int height, int tile, int overlap);

// One rendered tile: `pixels` covers split_tiles(...)[index].rendered.
struct TileImage {
  int index = 0;
  RgbImage pixels;
};

// The whole width x height image from every tile of the grid, each exactly
// once, in any order. `invalid_argument` for a bad grid, an index out of
// range or repeated, a missing tile, or pixels of the wrong size.
Result<RgbImage> stitch(int width, int height, int tile, int overlap, std::span<const TileImage> tiles);

}  // namespace runsnack::render
