#pragma once
// The plain data a render works on: materials, primitives, the BVH, the
// camera frame, and the SceneView that points at them. Trivially copyable, so
// the CUDA path uploads the arrays as they are (cuda/gpu_kernel.cu) and the
// tracer (tracer.hpp) reads them on both.

#include <cstdint>

#include "pool/render/math.hpp"

namespace runsnack::render {

enum class MaterialKind : std::int32_t { diffuse = 0, mirror = 1, glass = 2, emissive = 3 };

struct Material {
  MaterialKind kind = MaterialKind::diffuse;
  Vec3 color{0.8f, 0.8f, 0.8f};  // albedo, mirror or glass tint, or emitted colour
  float ior = 1.5f;              // glass only
  float strength = 1.0f;         // emissive only: radiance = color * strength
};

struct Sphere {
  Vec3 center;
  float radius = 1;
  std::int32_t material = 0;
};

// An infinite plane through `point` with unit `normal`.
struct Plane {
  Vec3 point;
  Vec3 normal{0, 1, 0};
  std::int32_t material = 0;
};

struct Triangle {
  Vec3 a, b, c;
  std::int32_t material = 0;
};

// A BVH node over spheres and triangles. Interior (count == 0): children are
// nodes `first` and `first + 1`. Leaf: primitives prim_refs[first, first + count).
struct BvhNode {
  Vec3 lo;
  std::int32_t first = 0;
  Vec3 hi;
  std::int32_t count = 0;
};

// A primitive reference in the BVH: values below the sphere count name a
// sphere, the rest name triangle (ref - sphere count).
using PrimRef = std::uint32_t;

// Background: a vertical gradient from `bottom` (looking down) to `top`
// (looking up); both equal for a constant colour.
struct Background {
  Vec3 top;
  Vec3 bottom;
};

// The camera reduced to what a ray needs, for one image size (make_camera_frame, scene.hpp).
struct CameraFrame {
  Vec3 origin;
  Vec3 lower_left;  // the image plane's corner at the focus distance
  Vec3 horizontal;  // image plane width vector
  Vec3 vertical;    // image plane height vector
  Vec3 u, v;        // lens axes
  float lens_radius = 0;
};

// Pointers to a scene's arrays (host or device memory) and one render's settings.
struct SceneView {
  const Material* materials = nullptr;
  const Sphere* spheres = nullptr;
  std::int32_t num_spheres = 0;
  const Plane* planes = nullptr;
  std::int32_t num_planes = 0;
  const Triangle* triangles = nullptr;
  const BvhNode* nodes = nullptr;
  std::int32_t num_nodes = 0;
  const PrimRef* refs = nullptr;
  const std::int32_t* lights = nullptr;  // sphere indices with an emissive material
  std::int32_t num_lights = 0;
  Background background;
  CameraFrame camera;
  std::int32_t width = 0;  // the whole image, not the rectangle being rendered
  std::int32_t height = 0;
  std::int32_t max_depth = 0;
  std::uint64_t seed = 0;
};

}  // namespace runsnack::render
