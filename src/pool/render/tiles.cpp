#include "pool/render/tiles.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace runsnack::render {
namespace {

int cells(int size, int tile) { return (size + tile - 1) / tile; }

// The weight along one axis of a tile rendered over [lo, hi) at pixel p of
// an axis `size` long.
std::uint32_t axis_weight(int p, int lo, int hi, int size, int overlap) {
  if (overlap == 0) return 1;
  int d = kMaxImageSide;  // distance to the nearest edge that is inside the image
  if (lo > 0) d = std::min(d, p - lo);
  if (hi < size) d = std::min(d, hi - 1 - p);
  return static_cast<std::uint32_t>(std::min(2 * d + 1, 4 * overlap));
}

}  // namespace

Result<std::vector<Tile>> split_tiles(int width, int height, int tile, int overlap) {
  if (width < 1 || width > kMaxImageSide || height < 1 || height > kMaxImageSide)
    return fail(errc::invalid_argument,
                "tiles: image size must be in [1, " + std::to_string(kMaxImageSide) + "]");
  if (tile < kMinTileSide || tile > kMaxTileSide)
    return fail(errc::invalid_argument, "tiles: tile must be in [" + std::to_string(kMinTileSide) + ", " +
                                            std::to_string(kMaxTileSide) + "]");
  int max_overlap = std::min(kMaxOverlap, tile / 2);
  if (overlap < 0 || overlap > max_overlap)
    return fail(errc::invalid_argument, "tiles: overlap must be in [0, " + std::to_string(max_overlap) + "]");

  int cols = cells(width, tile), rows = cells(height, tile);
  std::vector<Tile> tiles;
  tiles.reserve(static_cast<std::size_t>(cols) * static_cast<std::size_t>(rows));
  for (int ty = 0; ty < rows; ++ty) {
    for (int tx = 0; tx < cols; ++tx) {
      Tile t;
      t.index = ty * cols + tx;
      t.core = TileRect{tx * tile, ty * tile, std::min(tile, width - tx * tile),
                        std::min(tile, height - ty * tile)};
      int x0 = std::max(0, t.core.x - overlap), y0 = std::max(0, t.core.y - overlap);
      int x1 = std::min(width, t.core.x + t.core.w + overlap),
          y1 = std::min(height, t.core.y + t.core.h + overlap);
      t.rendered = TileRect{x0, y0, x1 - x0, y1 - y0};
      tiles.push_back(t);
    }
  }
  return tiles;
}

Result<RgbImage> stitch(int width, int height, int tile, int overlap, std::span<const TileImage> tiles) {
  auto grid = split_tiles(width, height, tile, overlap);
  if (!grid) return grid.error();
  std::vector<const RgbImage*> by_index(grid->size(), nullptr);
  for (const TileImage& t : tiles) {
    if (t.index < 0 || static_cast<std::size_t>(t.index) >= grid->size())
      return fail(errc::invalid_argument, "stitch: tile index " + std::to_string(t.index) + " out of range");
    const TileRect& r = (*grid)[static_cast<std::size_t>(t.index)].rendered;
    if (by_index[static_cast<std::size_t>(t.index)])
      return fail(errc::invalid_argument, "stitch: tile " + std::to_string(t.index) + " given twice");
    if (t.pixels.width != r.w || t.pixels.height != r.h ||
        t.pixels.rgb.size() != static_cast<std::size_t>(r.w) * static_cast<std::size_t>(r.h) * 3)
      return fail(errc::invalid_argument, "stitch: tile " + std::to_string(t.index) + " must be " +
                                              std::to_string(r.w) + "x" + std::to_string(r.h));
    by_index[static_cast<std::size_t>(t.index)] = &t.pixels;
  }
  for (std::size_t i = 0; i < by_index.size(); ++i)
    if (!by_index[i])
      return fail(errc::invalid_argument, "stitch: tile " + std::to_string(i) + " is missing");

  const int cols = cells(width, tile), rows = cells(height, tile);
  RgbImage out{width, height, std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    int ty_lo = std::max(0, y / tile - 1), ty_hi = std::min(rows - 1, y / tile + 1);
    for (int x = 0; x < width; ++x) {
      int tx_lo = std::max(0, x / tile - 1), tx_hi = std::min(cols - 1, x / tile + 1);
      std::uint64_t sum[3] = {0, 0, 0}, total = 0;
      for (int ty = ty_lo; ty <= ty_hi; ++ty) {
        for (int tx = tx_lo; tx <= tx_hi; ++tx) {
          std::size_t index = static_cast<std::size_t>(ty) * static_cast<std::size_t>(cols) + tx;
          const TileRect& r = (*grid)[index].rendered;
          if (x < r.x || x >= r.x + r.w || y < r.y || y >= r.y + r.h) continue;
          std::uint64_t w = std::uint64_t{axis_weight(x, r.x, r.x + r.w, width, overlap)} *
                            axis_weight(y, r.y, r.y + r.h, height, overlap);
          const std::uint8_t* px =
              by_index[index]->rgb.data() +
              (static_cast<std::size_t>(y - r.y) * static_cast<std::size_t>(r.w) + (x - r.x)) * 3;
          for (int c = 0; c < 3; ++c) sum[c] += w * px[c];
          total += w;
        }
      }
      std::uint8_t* o = out.rgb.data() + (static_cast<std::size_t>(y) * width + x) * 3;
      for (int c = 0; c < 3; ++c) o[c] = static_cast<std::uint8_t>((sum[c] + total / 2) / total);
    }
  }
  return out;
}

}  // namespace runsnack::render
