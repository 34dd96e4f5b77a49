// Spot checks of returned tiles: an honest tile passes, and the forgeries a
// worker could try instead of rendering (made-up pixels, fewer samples,
// another seed) are caught by re-rendering a few of its pixels.
#include "pool/render/spot_check.hpp"

#include <gtest/gtest.h>

#include "pool/render/test_scenes.hpp"

#include <vector>

namespace runsnack::render {
namespace {

RenderSettings settings() {
  RenderSettings s;
  s.width = 64, s.height = 48, s.spp = 4, s.seed = 7, s.max_depth = 6, s.threads = 2;
  return s;
}

const TileRect kTile{8, 8, 24, 20};

std::vector<std::pair<int, int>> sample(int n) {
  std::vector<std::pair<int, int>> out;
  for (int i = 0; i < n; ++i) out.emplace_back(kTile.x + (i * 7) % kTile.w, kTile.y + (i * 5) % kTile.h);
  return out;
}

TEST(SpotCheck, AnHonestTilePasses) {
  const Scene scene = testing::room_scene();
  auto tile = render_rect(scene, settings(), kTile).value();
  auto out = spot_check(scene, settings(), kTile, tile, sample(16)).value();
  EXPECT_TRUE(out.accepted) << out.why;
  EXPECT_EQ(out.mismatched, 0);
  EXPECT_EQ(out.checked, 16);
}

TEST(SpotCheck, SmallDifferencesWithinTheTolerancePass) {
  const Scene scene = testing::room_scene();
  auto tile = render_rect(scene, settings(), kTile).value();
  for (auto& v : tile.rgb) v = static_cast<std::uint8_t>(v < 255 ? v + 1 : v);  // one level, everywhere
  EXPECT_TRUE(spot_check(scene, settings(), kTile, tile, sample(16)).value().accepted);
}

TEST(SpotCheck, MadeUpPixelsFail) {
  const Scene scene = testing::room_scene();
  RgbImage forged{kTile.w, kTile.h, std::vector<std::uint8_t>(static_cast<std::size_t>(kTile.w) * kTile.h * 3, 128)};
  auto out = spot_check(scene, settings(), kTile, forged, sample(16)).value();
  EXPECT_FALSE(out.accepted);
  EXPECT_GT(out.mismatched, 8);
  EXPECT_NE(out.why.find("pixels checked differ"), std::string::npos) << out.why;
}

TEST(SpotCheck, FewerSamplesOrAnotherSeedFail) {
  const Scene scene = testing::room_scene();
  RenderSettings cheap = settings();
  cheap.spp = 1;
  auto lazy = render_rect(scene, cheap, kTile).value();
  EXPECT_FALSE(spot_check(scene, settings(), kTile, lazy, sample(16)).value().accepted);
  RenderSettings other = settings();
  other.seed = 8;
  auto reseeded = render_rect(scene, other, kTile).value();
  EXPECT_FALSE(spot_check(scene, settings(), kTile, reseeded, sample(16)).value().accepted);
}

TEST(SpotCheck, AFewAlteredPixelsAreAllowedUpToTheRule) {
  const Scene scene = testing::room_scene();
  auto tile = render_rect(scene, settings(), kTile).value();
  const auto pixels = sample(16);
  auto at = [&](std::pair<int, int> p) {
    return (static_cast<std::size_t>(p.second - kTile.y) * kTile.w + (p.first - kTile.x)) * 3;
  };
  tile.rgb[at(pixels[3])] ^= 0x80;  // one checked pixel off: allowed (a GPU path that went elsewhere)
  EXPECT_TRUE(spot_check(scene, settings(), kTile, tile, pixels).value().accepted);
  tile.rgb[at(pixels[9])] ^= 0x80;  // two: not
  EXPECT_FALSE(spot_check(scene, settings(), kTile, tile, pixels).value().accepted);
}

TEST(SpotCheck, BadInputIsAnError) {
  const Scene scene = testing::room_scene();
  RgbImage small{2, 2, std::vector<std::uint8_t>(12)};
  EXPECT_FALSE(spot_check(scene, settings(), kTile, small, sample(1)));
  auto tile = render_rect(scene, settings(), kTile).value();
  const std::pair<int, int> outside[] = {{0, 0}};
  EXPECT_FALSE(spot_check(scene, settings(), kTile, tile, outside));
}

}  // namespace
}  // namespace runsnack::render
