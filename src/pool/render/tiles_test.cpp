#include "pool/render/tiles.hpp"

#include <gtest/gtest.h>

#include <random>

#include "pool/render/test_scenes.hpp"

namespace runsnack::render {
namespace {

RgbImage crop(const RgbImage& img, TileRect r) {
  RgbImage out{r.w, r.h, {}};
  for (int y = r.y; y < r.y + r.h; ++y) {
    auto row = img.rgb.begin() + (static_cast<std::ptrdiff_t>(y) * img.width + r.x) * 3;
    out.rgb.insert(out.rgb.end(), row, row + static_cast<std::ptrdiff_t>(r.w) * 3);
  }
  return out;
}

RgbImage random_image(int w, int h, std::uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage img{w, h, std::vector<std::uint8_t>(static_cast<std::size_t>(w) * h * 3)};
  for (auto& v : img.rgb) v = static_cast<std::uint8_t>(rng());
  return img;
}

std::vector<TileImage> cut(const RgbImage& whole, const std::vector<Tile>& tiles) {
  std::vector<TileImage> out;
  for (const Tile& t : tiles) out.push_back(TileImage{t.index, crop(whole, t.rendered)});
  return out;
}

TEST(SplitTiles, GrowsCoresByTheOverlapClampedToTheImage) {
  auto tiles = split_tiles(300, 200, 128, 8);
  ASSERT_TRUE(tiles);
  ASSERT_EQ(tiles->size(), 6u);  // 3 columns, 2 rows
  const Tile& first = (*tiles)[0];
  EXPECT_EQ(first.core, (TileRect{0, 0, 128, 128}));
  EXPECT_EQ(first.rendered, (TileRect{0, 0, 136, 136}));
  const Tile& middle = (*tiles)[4];  // column 1, row 1
  EXPECT_EQ(middle.index, 4);
  EXPECT_EQ(middle.core, (TileRect{128, 128, 128, 72}));
  EXPECT_EQ(middle.rendered, (TileRect{120, 120, 144, 80}));
  const Tile& last = (*tiles)[5];
  EXPECT_EQ(last.core, (TileRect{256, 128, 44, 72}));
  EXPECT_EQ(last.rendered, (TileRect{248, 120, 52, 80}));

  auto exact = split_tiles(256, 128, 128, 0);
  ASSERT_TRUE(exact);
  ASSERT_EQ(exact->size(), 2u);
  EXPECT_EQ((*exact)[1].rendered, (*exact)[1].core);
}

TEST(SplitTiles, RefusesBadGrids) {
  EXPECT_FALSE(split_tiles(0, 100, 64, 8));
  EXPECT_FALSE(split_tiles(100, kMaxImageSide + 1, 64, 8));
  EXPECT_FALSE(split_tiles(100, 100, 8, 0));
  EXPECT_FALSE(split_tiles(100, 100, 64, 33));  // more than half a tile
  EXPECT_FALSE(split_tiles(100, 100, 64, -1));
  EXPECT_TRUE(split_tiles(100, 100, 64, 32));
}

TEST(Stitch, GivesBackTheImageTheTilesWereCutFrom) {
  // Uneven sizes, overlaps from none to half a tile, tiles in any order.
  for (auto [w, h, tile, overlap] : {std::array{70, 50, 16, 8}, std::array{64, 48, 16, 4},
                                     std::array{33, 17, 16, 0}, std::array{100, 20, 32, 5}}) {
    RgbImage whole = random_image(w, h, static_cast<std::uint32_t>(w * h));
    auto tiles = split_tiles(w, h, tile, overlap);
    ASSERT_TRUE(tiles);
    std::vector<TileImage> parts = cut(whole, *tiles);
    std::reverse(parts.begin(), parts.end());
    auto stitched = stitch(w, h, tile, overlap, parts);
    ASSERT_TRUE(stitched) << stitched.error().what();
    EXPECT_EQ(*stitched, whole) << w << "x" << h << " tile " << tile << " overlap " << overlap;
  }
}

TEST(Stitch, TiledRenderEqualsTheWholeRenderExactly) {
  Scene scene = testing::room_scene();
  RenderSettings s;
  s.width = 64;
  s.height = 48;
  s.spp = 3;
  s.seed = 9;
  s.threads = 2;
  auto whole = render_rect(scene, s, TileRect{0, 0, 64, 48});
  ASSERT_TRUE(whole);
  auto tiles = split_tiles(64, 48, 16, 4);
  ASSERT_TRUE(tiles);
  std::vector<TileImage> parts;
  for (const Tile& t : *tiles) {
    s.threads = 1 + t.index % 3;  // as if on different workers
    auto px = render_rect(scene, s, t.rendered);
    ASSERT_TRUE(px);
    parts.push_back(TileImage{t.index, std::move(*px)});
  }
  auto stitched = stitch(64, 48, 16, 4, parts);
  ASSERT_TRUE(stitched);
  EXPECT_EQ(stitched->rgb, whole->rgb);
}

TEST(Stitch, BlendsDisagreeingTilesWithoutASeam) {
  // Two tiles side by side, one all 100 and one all 200: across the 2 *
  // overlap band the values ramp from one to the other in small steps.
  const int w = 64, h = 16, tile = 32, overlap = 8;
  auto tiles = split_tiles(w, h, tile, overlap);
  ASSERT_TRUE(tiles);
  std::vector<TileImage> parts;
  for (const Tile& t : *tiles) {
    RgbImage px{t.rendered.w, t.rendered.h,
                std::vector<std::uint8_t>(static_cast<std::size_t>(t.rendered.w) * t.rendered.h * 3,
                                          t.index == 0 ? 100 : 200)};
    parts.push_back(TileImage{t.index, std::move(px)});
  }
  auto img = stitch(w, h, tile, overlap, parts);
  ASSERT_TRUE(img);
  auto at = [&](int x) { return img->rgb[static_cast<std::size_t>(5 * w + x) * 3]; };
  EXPECT_EQ(at(0), 100);
  EXPECT_EQ(at(tile - overlap - 1), 100);
  EXPECT_EQ(at(tile + overlap), 200);
  EXPECT_EQ(at(w - 1), 200);
  for (int x = 1; x < w; ++x) {
    EXPECT_GE(at(x), at(x - 1));
    EXPECT_LE(at(x) - at(x - 1), 100 / (2 * overlap) + 1) << "step at " << x;
  }
}

TEST(Stitch, RefusesIncompleteOrMismatchedTiles) {
  RgbImage whole = random_image(40, 40, 1);
  auto tiles = split_tiles(40, 40, 16, 4);
  ASSERT_TRUE(tiles);
  std::vector<TileImage> parts = cut(whole, *tiles);

  std::vector<TileImage> missing(parts.begin() + 1, parts.end());
  auto r = stitch(40, 40, 16, 4, missing);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "stitch: tile 0 is missing");

  std::vector<TileImage> twice = parts;
  twice.back().index = 0;
  EXPECT_FALSE(stitch(40, 40, 16, 4, twice));

  std::vector<TileImage> wrong_size = parts;
  wrong_size[3].pixels.width -= 1;
  EXPECT_FALSE(stitch(40, 40, 16, 4, wrong_size));

  std::vector<TileImage> out_of_range = parts;
  out_of_range[2].index = 99;
  EXPECT_FALSE(stitch(40, 40, 16, 4, out_of_range));
  EXPECT_FALSE(stitch(40, 40, 16, 20, parts));
}

}  // namespace
}  // namespace runsnack::render
