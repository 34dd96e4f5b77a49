#include "pool/render/scene.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "pool/render/bvh.hpp"

namespace runsnack::render {

Result<void> prepare_scene(Scene& scene) {
  const Camera& cam = scene.camera;
  Vec3 view = cam.position - cam.look_at;
  if (!(length(view) > 1e-6f)) return fail(errc::invalid_argument, "camera.look_at: equals camera.position");
  if (!(length(cross(cam.up, normalize(view))) > 1e-6f * length(cam.up)))
    return fail(errc::invalid_argument, "camera.up: zero or parallel to the view direction");
  if (!(cam.fov_degrees > 0 && cam.fov_degrees < 180))
    return fail(errc::invalid_argument, "camera.fov: must be in (0, 180) degrees");
  auto n_materials = static_cast<std::int32_t>(scene.materials.size());
  auto bad = [&](std::int32_t m) { return m < 0 || m >= n_materials; };
  for (std::size_t i = 0; i < scene.spheres.size(); ++i)
    if (bad(scene.spheres[i].material) || !(scene.spheres[i].radius > 0))
      return fail(errc::invalid_argument, "sphere " + std::to_string(i) + ": bad material or radius");
  for (std::size_t i = 0; i < scene.planes.size(); ++i) {
    float len = length(scene.planes[i].normal);
    if (bad(scene.planes[i].material) || !(std::fabs(len - 1.0f) < 1e-3f))
      return fail(errc::invalid_argument, "plane " + std::to_string(i) + ": bad material or normal");
  }
  for (std::size_t i = 0; i < scene.triangles.size(); ++i)
    if (bad(scene.triangles[i].material))
      return fail(errc::invalid_argument, "triangle " + std::to_string(i) + ": bad material");

  Bvh bvh = build_bvh(scene.spheres, scene.triangles);
  scene.bvh_nodes = std::move(bvh.nodes);
  scene.bvh_refs = std::move(bvh.refs);
  scene.lights.clear();
  for (std::size_t i = 0; i < scene.spheres.size(); ++i)
    if (scene.materials[scene.spheres[i].material].kind == MaterialKind::emissive)
      scene.lights.push_back(static_cast<std::int32_t>(i));
  scene.prepared = true;
  return {};
}

CameraFrame make_camera_frame(const Camera& camera, int width, int height) {
  float aspect = static_cast<float>(width) / static_cast<float>(height);
  float half_h = std::tan(camera.fov_degrees * std::numbers::pi_v<float> / 360.0f);
  float half_w = aspect * half_h;
  Vec3 w = normalize(camera.position - camera.look_at);
  Vec3 u = normalize(cross(camera.up, w));
  Vec3 v = cross(w, u);
  float focus = camera.focus_distance > 0 ? camera.focus_distance : length(camera.position - camera.look_at);

  CameraFrame f;
  f.origin = camera.position;
  f.horizontal = u * (2.0f * half_w * focus);
  f.vertical = v * (2.0f * half_h * focus);
  f.lower_left = camera.position - u * (half_w * focus) - v * (half_h * focus) - w * focus;
  f.u = u;
  f.v = v;
  f.lens_radius = camera.aperture / 2.0f;
  return f;
}

}  // namespace runsnack::render
