// The WebAssembly kernels' C ABI (www/wasm_kernels.js calls it): the browser
// worker's fallback without WebGPU runs the native worker's own code, built
// for wasm32 (CMakeLists.txt here): seeded matmul tiles from
// pool/matmul/matrix.cpp and render tiles from pool/render/ (scene parser,
// BVH, tracer, tile wire format). Only the glue is here.
//
// One call at a time (a page runs the kernels in one Web Worker). Results
// live in this module's memory until the next call; rs_out_len() is their
// length and rs_error() the last failure's one line.
#include "pool/matmul/matrix.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene_parser.hpp"
#include "pool/render/tile_wire.hpp"
#include "pool/render/tiles.hpp"

#include <boost/throw_exception.hpp>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

namespace boost {
// Boost without exceptions (-fno-exceptions) calls these; here they end the
// call with a trap, which the page reports as the task's failure.
void throw_exception(const std::exception&) { std::abort(); }
void throw_exception(const std::exception&, const source_location&) { std::abort(); }
}  // namespace boost

namespace {

using namespace runsnack;

std::string g_out;    // the last result's bytes
std::string g_error;  // the last failure
std::optional<render::Scene> g_scene;

std::uint64_t seed_of(std::uint32_t lo, std::uint32_t hi) { return (std::uint64_t{hi} << 32) | lo; }

const char* failed(std::string why) {
  g_error = std::move(why);
  g_out.clear();
  return nullptr;
}

}  // namespace

extern "C" {

__attribute__((export_name("rs_alloc"))) void* rs_alloc(std::uint32_t bytes) { return std::malloc(bytes); }
__attribute__((export_name("rs_free"))) void rs_free(void* p) { std::free(p); }
__attribute__((export_name("rs_out_len"))) std::uint32_t rs_out_len() { return static_cast<std::uint32_t>(g_out.size()); }
__attribute__((export_name("rs_error"))) const char* rs_error() { return g_error.c_str(); }

// Tile rows [r0, r0 + rows) x columns [c0, c0 + cols) of C = A * B for a
// seeded job of inner dimension k: rows * cols float32, row-major, the bytes
// a native worker returns (workloads/matmul_workload.cpp).
__attribute__((export_name("rs_matmul_seeded"))) const char* rs_matmul_seeded(std::uint32_t seed_lo, std::uint32_t seed_hi,
                                                                               std::int32_t k, std::int32_t r0, std::int32_t rows,
                                                                               std::int32_t c0, std::int32_t cols) {
  if (k < 1 || rows < 1 || cols < 1 || r0 < 0 || c0 < 0) return failed("matmul: bad tile");
  const std::uint64_t seed = seed_of(seed_lo, seed_hi);
  const auto a = pool::matmul::seeded_lines(seed, 'A', k, r0, rows);
  const auto bt = pool::matmul::seeded_lines(seed, 'B', k, c0, cols);
  g_out = pool::matmul::to_bytes(pool::matmul::multiply_transposed(a, bt));
  return g_out.data();
}

// Parses and prepares a scene (docs/SCENES.md); later renders use it. 1 on
// success, 0 with rs_error() set.
__attribute__((export_name("rs_scene_load"))) std::int32_t rs_scene_load(const char* text, std::uint32_t len) {
  g_scene.reset();
  auto scene = render::parse_scene(std::string_view(text, len));
  if (!scene) return failed("scene: " + scene.error().what()), 0;
  g_scene = std::move(*scene);
  return 1;
}

// Renders tile `index` of the loaded scene's image, split as the job's spec
// says (render/tiles.hpp: tile side and overlap), and returns it in the tile
// wire format (render/tile_wire.hpp): the tile.bin a native worker returns.
__attribute__((export_name("rs_render_tile"))) const char* rs_render_tile(std::int32_t width, std::int32_t height, std::int32_t spp,
                                                                           std::int32_t max_depth, std::uint32_t seed_lo,
                                                                           std::uint32_t seed_hi, std::int32_t tile,
                                                                           std::int32_t overlap, std::int32_t index) {
  if (!g_scene) return failed("render: no scene loaded");
  auto tiles = render::split_tiles(width, height, tile, overlap);
  if (!tiles) return failed("render: " + tiles.error().what());
  if (index < 0 || static_cast<std::size_t>(index) >= tiles->size()) return failed("render: no such tile");
  const render::TileRect rect = (*tiles)[static_cast<std::size_t>(index)].rendered;
  render::RenderSettings settings;
  settings.width = width, settings.height = height, settings.spp = spp, settings.max_depth = max_depth;
  settings.seed = seed_of(seed_lo, seed_hi), settings.threads = 1;
  auto image = render::render_rect_serial(*g_scene, settings, rect);
  if (!image) return failed("render: " + image.error().what());
  auto bytes = render::encode_tile_result(rect, *image);
  if (!bytes) return failed("render: " + bytes.error().what());
  g_out = std::move(*bytes);
  return g_out.data();
}

}  // extern "C"
