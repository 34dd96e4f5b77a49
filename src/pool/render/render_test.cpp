#include "pool/render/render.hpp"

#include <gtest/gtest.h>

#include "pool/render/scene_parser.hpp"
#include "pool/render/test_scenes.hpp"

namespace runsnack::render {
namespace {

RenderSettings small(int threads) {
  RenderSettings s;
  s.width = 64;
  s.height = 48;
  s.spp = 4;
  s.seed = 42;
  s.max_depth = 6;
  s.threads = threads;
  return s;
}

const TileRect kWhole{0, 0, 64, 48};

RgbImage crop(const RgbImage& img, TileRect r) {
  RgbImage out{r.w, r.h, {}};
  for (int y = r.y; y < r.y + r.h; ++y) {
    auto row = img.rgb.begin() + (static_cast<std::ptrdiff_t>(y) * img.width + r.x) * 3;
    out.rgb.insert(out.rgb.end(), row, row + static_cast<std::ptrdiff_t>(r.w) * 3);
  }
  return out;
}

const std::uint8_t* pixel(const RgbImage& img, int x, int y) {
  return img.rgb.data() + (static_cast<std::size_t>(y) * img.width + x) * 3;
}

int luma(const RgbImage& img, int x, int y) {
  const std::uint8_t* p = pixel(img, x, y);
  return p[0] + p[1] + p[2];
}

TEST(Render, IsDeterministicAcrossRunsAndThreadCounts) {
  Scene scene = testing::room_scene();
  auto one = render_rect(scene, small(1), kWhole);
  auto again = render_rect(scene, small(1), kWhole);
  auto three = render_rect(scene, small(3), kWhole);
  ASSERT_TRUE(one && again && three) << one.error().what();
  EXPECT_EQ(one->width, 64);
  EXPECT_EQ(one->height, 48);
  EXPECT_EQ(one->rgb.size(), 64u * 48 * 3);
  EXPECT_EQ(one->rgb, again->rgb);
  EXPECT_EQ(one->rgb, three->rgb);

  RenderSettings other_seed = small(2);
  other_seed.seed = 43;
  auto noise = render_rect(scene, other_seed, kWhole);
  ASSERT_TRUE(noise);
  EXPECT_NE(noise->rgb, one->rgb);  // the seed does drive the samples
}

TEST(Render, AnyRectangleMatchesTheWholeImage) {
  Scene scene = testing::room_scene();
  auto whole = render_rect(scene, small(2), kWhole);
  ASSERT_TRUE(whole);
  for (TileRect r :
       {TileRect{0, 0, 1, 1}, TileRect{13, 7, 20, 11}, TileRect{63, 47, 1, 1}, TileRect{40, 0, 24, 48}}) {
    auto part = render_rect(scene, small(1), r);
    ASSERT_TRUE(part);
    EXPECT_EQ(part->rgb, crop(*whole, r).rgb) << r.x << "," << r.y << " " << r.w << "x" << r.h;
  }
}

TEST(Render, AnEmissiveSphereShowsWhereItProjects) {
  // Camera on +z looking at the origin; a lamp at the origin, a grey floor
  // below it, a black sky. The lamp's pixel is the image centre.
  auto scene = parse_scene(R"({
    "camera": {"position": [0, 0, 5], "look_at": [0, 0, 0], "fov": 40},
    "background": [0, 0, 0],
    "materials": {"lamp": {"type": "emissive", "strength": 4}, "floor": {"type": "diffuse"}},
    "objects": [
      {"type": "sphere", "center": [0, 0, 0], "radius": 0.5, "material": "lamp"},
      {"type": "plane", "point": [0, -1, 0], "normal": [0, 1, 0], "material": "floor"}
    ]})");
  ASSERT_TRUE(scene) << scene.error().what();
  auto img = render_rect(*scene, small(2), kWhole);
  ASSERT_TRUE(img);
  EXPECT_GT(luma(*img, 32, 24), 600);  // the lamp, near white
  EXPECT_EQ(luma(*img, 32, 2), 0);     // the sky above it
  EXPECT_EQ(luma(*img, 2, 2), 0);
  // The floor: lit just below the lamp, dimmer towards the image's edge.
  int under = luma(*img, 32, 40), aside = luma(*img, 2, 40);
  EXPECT_GT(under, 30);
  EXPECT_GT(under, aside);
}

TEST(Render, MirrorAndGlassShowTheLamp) {
  // A mirror facing the camera reflects a lamp placed behind the camera.
  auto scene = parse_scene(R"({
    "camera": {"position": [0, 0, 5], "look_at": [0, 0, 0], "fov": 30},
    "materials": {"lamp": {"type": "emissive", "strength": 3}, "mirror": {"type": "mirror"}},
    "objects": [
      {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1], "material": "mirror"},
      {"type": "sphere", "center": [0, 0, 9], "radius": 1, "material": "lamp"}
    ]})");
  ASSERT_TRUE(scene);
  auto img = render_rect(*scene, small(2), kWhole);
  ASSERT_TRUE(img);
  EXPECT_GT(luma(*img, 32, 24), 600);
  EXPECT_EQ(luma(*img, 1, 1), 0);

  // A glass ball between the camera and a lamp passes the lamp's light.
  auto lens = parse_scene(R"({
    "camera": {"position": [0, 0, 5], "look_at": [0, 0, 0], "fov": 30},
    "materials": {"lamp": {"type": "emissive", "strength": 3}, "glass": {"type": "glass", "ior": 1.5}},
    "objects": [
      {"type": "sphere", "center": [0, 0, 0], "radius": 1, "material": "glass"},
      {"type": "sphere", "center": [0, 0, -5], "radius": 1, "material": "lamp"}
    ]})");
  ASSERT_TRUE(lens);
  auto through = render_rect(*lens, small(2), kWhole);
  ASSERT_TRUE(through);
  EXPECT_GT(luma(*through, 32, 24), 600);
  EXPECT_EQ(luma(*through, 1, 1), 0);
}

TEST(Render, RefusesBadRequests) {
  Scene scene = testing::room_scene();
  RenderSettings s = small(1);
  s.spp = 0;
  auto bad_spp = render_rect(scene, s, kWhole);
  ASSERT_FALSE(bad_spp);
  EXPECT_EQ(bad_spp.error().message, "spp: must be in [1, 65536]");
  EXPECT_FALSE(render_rect(scene, small(1), TileRect{60, 0, 5, 4}));
  EXPECT_FALSE(render_rect(scene, small(1), TileRect{0, 0, 0, 4}));
  EXPECT_FALSE(render_rect(scene, small(1), TileRect{-1, 0, 4, 4}));
  Scene unprepared = scene;
  unprepared.prepared = false;
  EXPECT_FALSE(render_rect(unprepared, small(1), kWhole));
}

TEST(Render, ToneMapIsMonotonicAndSaturates) {
  std::vector<float> linear = {0.0f, 0.01f, 0.1f, 0.5f, 1.0f, 4.0f, 1000.0f, 0.0f, 0.0f};
  RgbImage img = tone_map(linear, 3, 1, 1.0f);
  EXPECT_EQ(img.rgb[0], 0);
  for (std::size_t i = 1; i < 7; ++i) EXPECT_LT(img.rgb[i - 1], img.rgb[i]);
  EXPECT_EQ(img.rgb[6], 255);
  EXPECT_LT(tone_map(linear, 3, 1, 0.5f).rgb[3], img.rgb[3]);  // exposure scales
}

}  // namespace
}  // namespace runsnack::render
