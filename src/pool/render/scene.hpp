#pragma once
// A scene ready to render: camera, materials, primitives and the derived
// acceleration data. parse_scene (scene_parser.hpp) makes one from JSON;
// code that builds one by hand calls prepare_scene before rendering.
//
// A Scene is a plain value: copyable, read-only during a render, so any
// number of threads may render from one Scene at the same time.

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "pool/render/geometry.hpp"

namespace runsnack::render {

struct Camera {
  Vec3 position{0, 0, 5};
  Vec3 look_at{0, 0, 0};
  Vec3 up{0, 1, 0};
  float fov_degrees = 40;    // vertical field of view
  float aperture = 0;        // lens diameter; 0 is a pinhole
  float focus_distance = 0;  // 0: the distance from position to look_at
};

struct Scene {
  Camera camera;
  Background background;
  float exposure = 1;  // linear radiance is multiplied by this before tone mapping
  std::vector<Material> materials;
  std::vector<Sphere> spheres;
  std::vector<Plane> planes;
  std::vector<Triangle> triangles;

  // Derived by prepare_scene.
  std::vector<BvhNode> bvh_nodes;
  std::vector<PrimRef> bvh_refs;
  std::vector<std::int32_t> lights;  // indices of spheres with an emissive material
  bool prepared = false;
};

// Checks the camera (a view direction, an up vector not along it, a field of
// view in (0, 180)), that every material index is in range and plane normals
// are unit length, then builds the BVH and the light list and sets
// `prepared`. `invalid_argument` names the first bad field or object.
Result<void> prepare_scene(Scene& scene);

// The camera frame for an image of width x height (aspect ratio from them).
// Uses std::tan once per render, on the host, so CPU and GPU share the result.
CameraFrame make_camera_frame(const Camera& camera, int width, int height);

}  // namespace runsnack::render
