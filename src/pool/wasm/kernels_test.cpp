// The WebAssembly kernels (kernels.wasm, run under node through the page's
// glue, run_kernels.mjs) against the native worker's code: a seeded matmul
// tile must be bit-identical to OpenBLAS's (every partial sum is exact in
// float32), and a render tile must decode with the native tile wire format
// and pass the coordinator's check (render/spot_check.hpp) at every pixel.
#include "pool/matmul/matrix.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene_parser.hpp"
#include "pool/render/spot_check.hpp"
#include "pool/render/tile_wire.hpp"
#include "pool/render/tiles.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace runsnack {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class WasmKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("runsnack-wasm-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the requests under node; request i's bytes.
  std::vector<std::string> run(const json& requests) {
    std::ofstream(dir_ / "requests.json") << requests.dump();
    const std::string cmd = "node " + std::string(RUNSNACK_WASM_RUNNER) + " " + RUNSNACK_WASM_KERNELS + " " +
                            (dir_ / "requests.json").string() + " " + dir_.string() + " > " + (dir_ / "log").string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << cmd << "\n" << slurp(dir_ / "log");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < requests.size(); ++i) out.push_back(slurp(dir_ / (std::to_string(i) + ".bin")));
    return out;
  }

  fs::path dir_;
};

TEST_F(WasmKernels, SeededMatmulTileIsBitIdenticalToTheNativeOne) {
  // A tile off the origin, with odd sizes (the 2x2 kernel's edges) and a seed over 32 bits (the
  // page's seeds are JavaScript numbers: at most 2^53).
  const std::uint64_t seed = 0x1234567890abcull;
  const std::int64_t k = 301, r0 = 64, rows = 37, c0 = 96, cols = 29;
  auto out = run(json::array({{{"matmul", {{"seed", seed}, {"k", k}, {"r0", r0}, {"rows", rows}, {"c0", c0}, {"cols", cols}}}}}));
  using namespace pool::matmul;
  const Matrix native = multiply_transposed(seeded_lines(seed, 'A', k, r0, rows), seeded_lines(seed, 'B', k, c0, cols));
  ASSERT_EQ(out[0].size(), static_cast<std::size_t>(rows * cols) * sizeof(float));
  auto wasm = from_bytes(out[0], rows, cols);
  ASSERT_TRUE(wasm);
  int differing = 0;
  for (std::size_t i = 0; i < native.data.size(); ++i)
    if (wasm->data[i] != native.data[i] && differing++ == 0)
      ADD_FAILURE() << "entry " << i << ": wasm " << wasm->data[i] << ", native " << native.data[i];
  EXPECT_EQ(differing, 0) << "entries differ";
  EXPECT_EQ(out[0], to_bytes(native)) << "(the bytes too)";
}

TEST_F(WasmKernels, RenderTilePassesTheCoordinatorsCheckAtEveryPixel) {
  const fs::path scene_file = fs::path(RUNSNACK_EXAMPLE_SCENES) / "cornell.json";
  const json spec = {{"width", 96}, {"height", 64}, {"spp", 8}, {"max_depth", 6}, {"seed", 7}, {"tile", 32}, {"overlap", 4}};
  const int index = 4;  // an inner tile: its rect is grown by the overlap on every side
  auto out = run(json::array({{{"render", {{"scene", scene_file.string()}, {"spec", spec}, {"index", index}}}}}));

  auto tile = render::decode_tile_result(out[0]);  // the native decoder reads the browser's stored PNG
  ASSERT_TRUE(tile) << tile.error().what();
  auto tiles = render::split_tiles(96, 64, 32, 4);
  ASSERT_TRUE(tiles);
  const render::TileRect rect = (*tiles)[index].rendered;
  EXPECT_EQ(tile->rect, rect);

  auto scene = render::parse_scene(slurp(scene_file));
  ASSERT_TRUE(scene) << scene.error().what();
  render::RenderSettings settings;
  settings.width = 96, settings.height = 64, settings.spp = 8, settings.max_depth = 6, settings.seed = 7;
  auto native = render::render_rect(*scene, settings, rect);
  ASSERT_TRUE(native);
  std::vector<std::pair<int, int>> every;
  int differing = 0, worst = 0;
  for (int y = rect.y; y < rect.y + rect.h; ++y)
    for (int x = rect.x; x < rect.x + rect.w; ++x) {
      every.emplace_back(x, y);
      const std::size_t at = (static_cast<std::size_t>(y - rect.y) * rect.w + (x - rect.x)) * 3;
      int d = 0;
      for (int c = 0; c < 3; ++c) d = std::max(d, std::abs(int{native->rgb[at + c]} - int{tile->pixels.rgb[at + c]}));
      differing += d > 0, worst = std::max(worst, d);
    }
  auto check = render::spot_check(*scene, settings, rect, tile->pixels, every);
  ASSERT_TRUE(check);
  EXPECT_TRUE(check->accepted) << check->why;
  RecordProperty("differing_pixels", differing);
  RecordProperty("largest_difference", worst);
  std::cout << "render tile " << rect.w << "x" << rect.h << ": " << differing << " pixels differ from the native render, by at most "
            << worst << " levels\n";
}

TEST_F(WasmKernels, ABadSceneIsAnErrorNotACrash) {
  std::ofstream(dir_ / "bad.json") << R"({"camera": 3})";
  const json spec = {{"width", 32}, {"height", 32}, {"spp", 1}, {"max_depth", 2}, {"seed", 1}, {"tile", 16}, {"overlap", 0}};
  std::ofstream(dir_ / "requests.json") << json::array({{{"render", {{"scene", (dir_ / "bad.json").string()}, {"spec", spec}, {"index", 0}}}}}).dump();
  const std::string cmd = "node " + std::string(RUNSNACK_WASM_RUNNER) + " " + RUNSNACK_WASM_KERNELS + " " +
                          (dir_ / "requests.json").string() + " " + dir_.string() + " > " + (dir_ / "log").string() + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(slurp(dir_ / "log").find("scene: "), std::string::npos) << slurp(dir_ / "log");
}

}  // namespace
}  // namespace runsnack
