#include "pool/render/render_rows.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "pool/render/scene_view.hpp"
#include "pool/render/tracer.hpp"

namespace runsnack::render {
namespace {

Error out_of_range(const char* name, long long lo, long long hi) {
  return fail(errc::invalid_argument,
              std::string(name) + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

std::uint8_t encode_channel(float linear, float exposure) {
  float x = linear * exposure;
  float mapped = (x * (2.51f * x + 0.03f)) / (x * (2.43f * x + 0.59f) + 0.14f);
  mapped = std::clamp(mapped, 0.0f, 1.0f);
  float srgb = mapped <= 0.0031308f ? 12.92f * mapped : 1.055f * std::pow(mapped, 1.0f / 2.4f) - 0.055f;
  return static_cast<std::uint8_t>(std::lround(std::clamp(srgb, 0.0f, 1.0f) * 255.0f));
}

}  // namespace

Result<void> validate_settings(const RenderSettings& s) {
  if (s.width < 1 || s.width > kMaxImageSide) return out_of_range("width", 1, kMaxImageSide);
  if (s.height < 1 || s.height > kMaxImageSide) return out_of_range("height", 1, kMaxImageSide);
  if (s.spp < 1 || s.spp > kMaxSpp) return out_of_range("spp", 1, kMaxSpp);
  if (s.max_depth < 1 || s.max_depth > kMaxDepth) return out_of_range("max_depth", 1, kMaxDepth);
  if (s.threads < 0 || s.threads > kMaxThreads) return out_of_range("threads", 0, kMaxThreads);
  return {};
}

Result<void> validate_rect(const RenderSettings& s, TileRect r) {
  if (r.w < 1 || r.h < 1 || r.x < 0 || r.y < 0 || r.x > s.width - r.w || r.y > s.height - r.h)
    return fail(errc::invalid_argument, "rect " + std::to_string(r.w) + "x" + std::to_string(r.h) + "+" +
                                            std::to_string(r.x) + "+" + std::to_string(r.y) +
                                            ": not inside the " + std::to_string(s.width) + "x" +
                                            std::to_string(s.height) + " image");
  return {};
}

RgbImage tone_map(std::span<const float> linear, int w, int h, float exposure) {
  RgbImage img{w, h, std::vector<std::uint8_t>(linear.size())};
  for (std::size_t i = 0; i < linear.size(); ++i) img.rgb[i] = encode_channel(linear[i], exposure);
  return img;
}

Result<RgbImage> render_rect_serial(const Scene& scene, const RenderSettings& settings, TileRect rect) {
  if (auto r = detail::check_render(scene, settings, rect); !r) return r.error();
  const SceneView view = host_scene_view(scene, settings);
  std::vector<float> linear(static_cast<std::size_t>(rect.w) * static_cast<std::size_t>(rect.h) * 3);
  for (int row = 0; row < rect.h; ++row)
    detail::render_row(view, settings.spp, rect, row, linear.data() + static_cast<std::size_t>(row) * rect.w * 3);
  return tone_map(linear, rect.w, rect.h, scene.exposure);
}

namespace detail {

Result<void> check_render(const Scene& scene, const RenderSettings& settings, TileRect rect) {
  if (auto r = validate_settings(settings); !r) return r.error();
  if (auto r = validate_rect(settings, rect); !r) return r.error();
  if (!scene.prepared) return fail(errc::invalid_argument, "render: the scene is not prepared (prepare_scene)");
  return {};
}

void render_row(const SceneView& view, int spp, TileRect rect, int row, float* out) {
  for (int col = 0; col < rect.w; ++col) {
    Vec3 sum = tracer::accumulate_samples(view, rect.x + col, rect.y + row, 0, spp, Vec3{});
    Vec3 c = tracer::sample_mean(sum, spp);
    out[3 * col] = c.x;
    out[3 * col + 1] = c.y;
    out[3 * col + 2] = c.z;
  }
}

}  // namespace detail
}  // namespace runsnack::render
