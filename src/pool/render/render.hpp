#pragma once
// Rendering a rectangle of an image on the CPU.
//
// Every pixel is a pure function of (scene, settings without `threads`,
// x, y): its samples draw random numbers keyed by (seed, x, y, sample), and
// tone mapping looks at that pixel alone. So a rectangle rendered on its own
// is bit-for-bit the same as that part of the whole image, whatever the
// thread count, and tiles rendered apart stitch into the whole render
// exactly (tiles.hpp). The library is built with floating-point contraction
// off so that x86-64 machines (and the CUDA kernel, gpu_render.hpp) agree.
//
// Output is 8-bit RGB after tone mapping: linear radiance times the scene's
// exposure, the ACES filmic curve (Narkowicz's fit), the sRGB transfer
// function, rounded to 0..255.

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.hpp"
#include "pool/render/image.hpp"
#include "pool/render/scene.hpp"

namespace runsnack::render {

inline constexpr int kMaxImageSide = 16384;
inline constexpr int kMaxSpp = 65536;
inline constexpr int kMaxDepth = 64;
inline constexpr int kMaxThreads = 256;

struct RenderSettings {
  int width = 0;  // the whole image, in pixels
  int height = 0;
  int spp = 16;  // samples per pixel
  std::uint64_t seed = 1;
  int max_depth = 8;  // bounces per path
  int threads = 0;    // CPU threads; 0 means std::thread::hardware_concurrency()
};

// A rectangle of the whole image: columns [x, x + w), rows [y, y + h).
struct TileRect {
  int x = 0, y = 0, w = 0, h = 0;
  bool operator==(const TileRect&) const = default;
};

// `invalid_argument` naming the first setting out of range: width and
// height in [1, kMaxImageSide], spp in [1, kMaxSpp], max_depth in
// [1, kMaxDepth], threads in [0, kMaxThreads].
Result<void> validate_settings(const RenderSettings& settings);

// `invalid_argument` unless rect is non-empty and inside the image.
Result<void> validate_rect(const RenderSettings& settings, TileRect rect);

// Renders `rect` of the image described by `settings` with settings.threads
// threads (rows handed out one at a time). Fails with `invalid_argument` for
// bad settings, a bad rect or a scene that prepare_scene has not prepared.
// The result is rect.w x rect.h.
Result<RgbImage> render_rect(const Scene& scene, const RenderSettings& settings, TileRect rect);

// render_rect on the calling thread alone (settings.threads is ignored): the
// same pixels, for builds without threads (the WebAssembly kernels,
// src/pool/wasm/).
Result<RgbImage> render_rect_serial(const Scene& scene, const RenderSettings& settings, TileRect rect);

// The tone mapping described above, from w * h * 3 linear floats (the layout
// of RgbImage). Shared by the CPU and GPU renderers so both quantise alike.
RgbImage tone_map(std::span<const float> linear, int w, int h, float exposure);

}  // namespace runsnack::render
