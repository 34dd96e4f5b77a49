#include "pool/render/gpu_render.hpp"

#include <gtest/gtest.h>

#include "pool/render/test_scenes.hpp"
#include "pool/render/tiles.hpp"

// The CUDA driver maps memory where AddressSanitizer keeps its shadow gap,
// and leaves allocations behind at exit: without these a sanitized build
// cannot use the GPU at all (NVIDIA's advice for ASan with CUDA).
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "protect_shadow_gap=0:detect_leaks=0"; }
#endif

namespace runsnack::render {
namespace {

RenderSettings settings() {
  RenderSettings s;
  s.width = 96;
  s.height = 64;
  s.spp = 8;
  s.seed = 3;
  s.threads = 2;
  return s;
}

const TileRect kWhole{0, 0, 96, 64};

TEST(GpuRender, ReportsAvailabilityWithoutFailing) {
  bool available = gpu_render_available();  // must simply return on any machine
  if (!gpu_render_compiled()) {
    EXPECT_FALSE(available);
  }
  if (available) return;
  auto r = render_rect_gpu(testing::room_scene(), settings(), kWhole);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::unsupported)) << r.error().what();
}

TEST(GpuRender, MatchesTheCpuRender) {
  if (!gpu_render_available()) {
    GTEST_SKIP() << "no CUDA device (compiled with CUDA: " << gpu_render_compiled() << ")";
  }
  for (const char* name : {"cornell.json", "spheres.json"}) {
    Scene scene = parse_scene(testing::read_example(name)).value();
    auto cpu = render_rect(scene, settings(), kWhole);
    auto gpu = render_rect_gpu(scene, settings(), kWhole);
    ASSERT_TRUE(cpu && gpu) << (gpu ? "" : gpu.error().what());
    double db = psnr(*cpu, *gpu).value();
    std::size_t same = 0;
    for (std::size_t i = 0; i < cpu->rgb.size(); ++i) same += cpu->rgb[i] == gpu->rgb[i];
    std::printf("%s: CPU vs GPU PSNR %.2f dB, %.4f%% of channels identical\n", name, db,
                100.0 * static_cast<double>(same) / static_cast<double>(cpu->rgb.size()));
    EXPECT_GT(db, 40.0) << name;
  }
}

TEST(GpuRender, TilesFromCpuAndGpuStitchCloseToTheWhole) {
  if (!gpu_render_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  Scene scene = parse_scene(testing::read_example("cornell.json")).value();
  auto whole = render_rect(scene, settings(), kWhole);
  ASSERT_TRUE(whole);
  auto tiles = split_tiles(96, 64, 32, 8);
  ASSERT_TRUE(tiles);
  std::vector<TileImage> parts;
  for (const Tile& t : *tiles) {  // alternate devices, as a mixed pool would
    auto px = t.index % 2 ? render_rect_gpu(scene, settings(), t.rendered)
                          : render_rect(scene, settings(), t.rendered);
    ASSERT_TRUE(px);
    parts.push_back(TileImage{t.index, std::move(*px)});
  }
  auto stitched = stitch(96, 64, 32, 8, parts);
  ASSERT_TRUE(stitched);
  EXPECT_GT(psnr(*whole, *stitched).value(), 40.0);
}

}  // namespace
}  // namespace runsnack::render
