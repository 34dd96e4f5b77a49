// render_check_bench: what checking a render tile costs the coordinator
// against what rendering it cost the worker (docs/RENDER.md "Checking
// tiles", docs/PERFORMANCE.md). For tiles of a 3840 x 2160 job (--tile 128
// --overlap 8: 144 x 144 rendered pixels) spread over the image, it renders
// each tile on one thread as a worker would, encodes it as the tile wire
// format, then times what the coordinator does: decode it and re-render 16
// random pixels (the render workload's rule: fewer at high spp).
//
//   render_check_bench [--scene FILE] [--spp 16] [--tiles 8]
#include <CLI/CLI.hpp>

#include "pool/render/render.hpp"
#include "pool/render/scene_parser.hpp"
#include "pool/render/spot_check.hpp"
#include "pool/render/tile_wire.hpp"
#include "pool/render/tiles.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

int main(int argc, char** argv) {
  using namespace runsnack::render;
  CLI::App app{"render_check_bench: the coordinator's tile check against the tile's render"};
  std::string scene_path = "examples/scenes/cornell.json";
  RenderSettings s;
  s.width = 3840, s.height = 2160, s.spp = 16, s.threads = 1;
  int tiles_wanted = 8;
  app.add_option("--scene", scene_path, "scene file (docs/SCENES.md)");
  app.add_option("--spp", s.spp, "samples per pixel");
  app.add_option("--tiles", tiles_wanted, "tiles to render and check, spread over the image");
  CLI11_PARSE(app, argc, argv);
  std::ifstream in(scene_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  auto scene = parse_scene(text.str());
  if (!scene) {
    std::fprintf(stderr, "render_check_bench: %s\n", scene.error().what().c_str());
    return 1;
  }
  auto tiles = split_tiles(s.width, s.height, 128, 8).value();
  const int pixels = static_cast<int>(std::clamp<long>((1L << 18) / std::max(s.spp, 1), 2L, 16L));
  std::mt19937_64 rng(1);
  double render_s = 0, decode_s = 0, check_s = 0;
  int mismatched = 0;
  for (int i = 0; i < tiles_wanted; ++i) {
    const Tile& t = tiles[static_cast<std::size_t>(i) * tiles.size() / static_cast<std::size_t>(tiles_wanted)];
    auto start = Clock::now();
    auto image = render_rect(*scene, s, t.rendered).value();
    render_s += since(start);
    auto bytes = encode_tile_result(t.rendered, image).value();
    start = Clock::now();
    auto decoded = decode_tile_result(bytes).value();
    decode_s += since(start);
    std::vector<std::pair<int, int>> at;
    std::uniform_int_distribution<int> xs(t.rendered.x, t.rendered.x + t.rendered.w - 1),
        ys(t.rendered.y, t.rendered.y + t.rendered.h - 1);
    for (int k = 0; k < pixels; ++k) at.emplace_back(xs(rng), ys(rng));
    start = Clock::now();
    auto out = spot_check(*scene, s, t.rendered, decoded.pixels, at).value();
    check_s += since(start);
    mismatched += out.mismatched;
  }
  std::printf("%s, spp %d, %d tiles of 144 x 144: render %.3f s/tile (1 thread), check %.4f s/tile "
              "(decode %.4f + %d pixels %.4f) = %.3f%% of the render; %d checked pixels differed\n",
              scene_path.c_str(), s.spp, tiles_wanted, render_s / tiles_wanted, (decode_s + check_s) / tiles_wanted,
              decode_s / tiles_wanted, pixels, check_s / tiles_wanted, 100 * (decode_s + check_s) / render_s, mismatched);
  return mismatched == 0 ? 0 : 1;
}
