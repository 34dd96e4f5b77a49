#include "pool/render/scene_view.hpp"

namespace runsnack::render {

SceneView host_scene_view(const Scene& scene, const RenderSettings& settings) {
  SceneView v;
  v.materials = scene.materials.data();
  v.spheres = scene.spheres.data();
  v.num_spheres = static_cast<std::int32_t>(scene.spheres.size());
  v.planes = scene.planes.data();
  v.num_planes = static_cast<std::int32_t>(scene.planes.size());
  v.triangles = scene.triangles.data();
  v.nodes = scene.bvh_nodes.data();
  v.num_nodes = static_cast<std::int32_t>(scene.bvh_nodes.size());
  v.refs = scene.bvh_refs.data();
  v.lights = scene.lights.data();
  v.num_lights = static_cast<std::int32_t>(scene.lights.size());
  v.background = scene.background;
  v.camera = make_camera_frame(scene.camera, settings.width, settings.height);
  v.width = settings.width;
  v.height = settings.height;
  v.max_depth = settings.max_depth;
  v.seed = settings.seed;
  return v;
}

}  // namespace runsnack::render
