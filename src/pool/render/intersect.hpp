#pragma once
// Ray intersection against a SceneView: planes one by one, spheres and
// triangles through the BVH. Shared by the CPU and the CUDA kernel.

#include <cstdint>

#include "pool/render/geometry.hpp"
#include "pool/render/math.hpp"

namespace runsnack::render::tracer {

inline constexpr float kFar = 1e30f;
inline constexpr float kTMin = 1e-6f;
inline constexpr int kStackSize = 64;  // bvh.cpp keeps the tree shallower than this

enum HitKind : std::int32_t { kNone = 0, kPlane = 1, kSphere = 2, kTriangle = 3 };

struct Hit {
  float t = kFar;
  std::int32_t kind = kNone;
  std::int32_t index = -1;
};

RUNSNACK_HD inline void hit_sphere(const Sphere& s, std::int32_t index, Vec3 o, Vec3 d, Hit& hit) {
  Vec3 oc = o - s.center;
  float a = dot(d, d);
  float half_b = dot(oc, d);
  float c = dot(oc, oc) - s.radius * s.radius;
  float disc = half_b * half_b - a * c;
  if (disc < 0.0f) return;
  float root = sqrtf(disc);
  float t = (-half_b - root) / a;
  if (t <= kTMin) t = (-half_b + root) / a;
  if (t <= kTMin || t >= hit.t) return;
  hit = Hit{t, kSphere, index};
}

// Möller–Trumbore.
RUNSNACK_HD inline void hit_triangle(const Triangle& tri, std::int32_t index, Vec3 o, Vec3 d, Hit& hit) {
  Vec3 e1 = tri.b - tri.a;
  Vec3 e2 = tri.c - tri.a;
  Vec3 p = cross(d, e2);
  float det = dot(e1, p);
  if (det > -1e-12f && det < 1e-12f) return;
  float inv = 1.0f / det;
  Vec3 s = o - tri.a;
  float u = dot(s, p) * inv;
  if (u < 0.0f || u > 1.0f) return;
  Vec3 q = cross(s, e1);
  float v = dot(d, q) * inv;
  if (v < 0.0f || u + v > 1.0f) return;
  float t = dot(e2, q) * inv;
  if (t <= kTMin || t >= hit.t) return;
  hit = Hit{t, kTriangle, index};
}

// Entry distance of the ray into the node's box, or kFar when it misses or
// enters no nearer than `limit`.
RUNSNACK_HD inline float box_entry(const BvhNode& n, Vec3 o, Vec3 inv, float limit) {
  float tx1 = (n.lo.x - o.x) * inv.x, tx2 = (n.hi.x - o.x) * inv.x;
  float ty1 = (n.lo.y - o.y) * inv.y, ty2 = (n.hi.y - o.y) * inv.y;
  float tz1 = (n.lo.z - o.z) * inv.z, tz2 = (n.hi.z - o.z) * inv.z;
  float enter = max_f(max_f(min_f(tx1, tx2), min_f(ty1, ty2)), max_f(min_f(tz1, tz2), 0.0f));
  float leave = min_f(min_f(max_f(tx1, tx2), max_f(ty1, ty2)), min_f(max_f(tz1, tz2), limit));
  return enter <= leave ? enter : kFar;
}

RUNSNACK_HD inline void hit_prim(const SceneView& s, PrimRef ref, Vec3 o, Vec3 d, Hit& hit) {
  std::int32_t i = static_cast<std::int32_t>(ref);
  if (i < s.num_spheres)
    hit_sphere(s.spheres[i], i, o, d, hit);
  else
    hit_triangle(s.triangles[i - s.num_spheres], i - s.num_spheres, o, d, hit);
}

// The nearest hit along o + t d, kTMin < t < t_max; false when there is none.
RUNSNACK_HD inline bool intersect(const SceneView& s, Vec3 o, Vec3 d, Hit& hit, float t_max = kFar) {
  hit = Hit{};
  hit.t = t_max;
  for (std::int32_t i = 0; i < s.num_planes; ++i) {
    const Plane& pl = s.planes[i];
    float denom = dot(pl.normal, d);
    if (denom == 0.0f) continue;
    float t = dot(pl.point - o, pl.normal) / denom;
    if (t > kTMin && t < hit.t) hit = Hit{t, kPlane, i};
  }
  if (s.num_nodes == 0) return hit.kind != kNone;

  Vec3 inv{1.0f / d.x, 1.0f / d.y, 1.0f / d.z};
  std::int32_t stack[kStackSize];
  float stack_t[kStackSize];
  std::int32_t sp = 0;
  if (box_entry(s.nodes[0], o, inv, hit.t) < kFar) {
    stack[0] = 0;
    stack_t[0] = 0.0f;
    sp = 1;
  }
  while (sp > 0) {
    --sp;
    if (stack_t[sp] >= hit.t) continue;
    std::int32_t node = stack[sp];
    for (;;) {
      const BvhNode& n = s.nodes[node];
      if (n.count > 0) {
        for (std::int32_t k = 0; k < n.count; ++k) hit_prim(s, s.refs[n.first + k], o, d, hit);
        break;
      }
      std::int32_t near_child = n.first, far_child = n.first + 1;
      float t_near = box_entry(s.nodes[near_child], o, inv, hit.t);
      float t_far = box_entry(s.nodes[far_child], o, inv, hit.t);
      if (t_far < t_near) {
        std::int32_t c = near_child;
        near_child = far_child;
        far_child = c;
        float t = t_near;
        t_near = t_far;
        t_far = t;
      }
      if (t_near >= kFar) break;
      if (t_far < kFar && sp < kStackSize) {
        stack[sp] = far_child;
        stack_t[sp] = t_far;
        ++sp;
      }
      node = near_child;
    }
  }
  return hit.kind != kNone;
}

RUNSNACK_HD inline Vec3 hit_normal(const SceneView& s, const Hit& hit, Vec3 p) {
  if (hit.kind == kPlane) return s.planes[hit.index].normal;
  if (hit.kind == kSphere) {
    const Sphere& sp = s.spheres[hit.index];
    return (p - sp.center) * (1.0f / sp.radius);
  }
  const Triangle& tri = s.triangles[hit.index];
  return normalize(cross(tri.b - tri.a, tri.c - tri.a));
}

RUNSNACK_HD inline std::int32_t hit_material(const SceneView& s, const Hit& hit) {
  if (hit.kind == kPlane) return s.planes[hit.index].material;
  if (hit.kind == kSphere) return s.spheres[hit.index].material;
  return s.triangles[hit.index].material;
}

}  // namespace runsnack::render::tracer
