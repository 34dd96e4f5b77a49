#include "pool/render/render.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "pool/render/render_rows.hpp"
#include "pool/render/scene_view.hpp"

namespace runsnack::render {
namespace {

int thread_count(const RenderSettings& s, int rows) {
  int n = s.threads > 0 ? s.threads : static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(n, 1, rows);
}

}  // namespace

Result<RgbImage> render_rect(const Scene& scene, const RenderSettings& settings, TileRect rect) {
  if (auto r = detail::check_render(scene, settings, rect); !r) return r.error();
  const SceneView view = host_scene_view(scene, settings);
  std::vector<float> linear(static_cast<std::size_t>(rect.w) * static_cast<std::size_t>(rect.h) * 3);
  std::atomic<int> next_row{0};
  auto work = [&] {
    for (int row = next_row++; row < rect.h; row = next_row++)
      detail::render_row(view, settings.spp, rect, row, linear.data() + static_cast<std::size_t>(row) * rect.w * 3);
  };
  {
    std::vector<std::jthread> helpers;
    for (int i = 1; i < thread_count(settings, rect.h); ++i) helpers.emplace_back(work);
    work();
  }
  return tone_map(linear, rect.w, rect.h, scene.exposure);
}

}  // namespace runsnack::render
