#include "pool/render/gpu_render.hpp"

#include <vector>

#include "pool/render/gpu_kernel.hpp"
#include "pool/render/scene_view.hpp"

namespace runsnack::render {

bool gpu_render_compiled() { return gpu::compiled(); }

bool gpu_render_available() { return gpu::available(); }

Result<RgbImage> render_rect_gpu(const Scene& scene, const RenderSettings& settings, TileRect rect) {
  if (auto r = validate_settings(settings); !r) return r.error();
  if (auto r = validate_rect(settings, rect); !r) return r.error();
  if (!scene.prepared)
    return fail(errc::invalid_argument, "render: the scene is not prepared (prepare_scene)");
  if (!gpu::available()) return fail(errc::unsupported, "render: no CUDA device available");

  const SceneView view = host_scene_view(scene, settings);
  gpu::SceneSizes sizes;
  sizes.materials = static_cast<std::int32_t>(scene.materials.size());
  sizes.triangles = static_cast<std::int32_t>(scene.triangles.size());
  sizes.refs = static_cast<std::int32_t>(scene.bvh_refs.size());
  std::vector<float> linear(static_cast<std::size_t>(rect.w) * static_cast<std::size_t>(rect.h) * 3);
  std::string error =
      gpu::render_linear(view, sizes, rect.x, rect.y, rect.w, rect.h, settings.spp, linear.data());
  if (!error.empty()) return fail(errc::internal, "render on GPU: " + error);
  return tone_map(linear, rect.w, rect.h, scene.exposure);
}

}  // namespace runsnack::render
