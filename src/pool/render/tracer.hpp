#pragma once
// The path tracer itself, one sample at a time, shared word for word by the
// CPU renderer (render.cpp) and the CUDA kernel (cuda/gpu_render.cu).
//
// Determinism: a sample's random numbers come from a counter-based generator
// keyed by (seed, x, y, sample index) alone, so a pixel's value does not
// depend on which rectangle, thread or device rendered it. The maths keeps to
// IEEE basic operations (math.hpp); random unit-disk points come from
// rejection sampling instead of sin/cos for the same reason.
//
// Light transport: diffuse, mirror and glass (Schlick Fresnel) surfaces;
// emissive surfaces end a path. Emissive spheres are also sampled directly
// from diffuse surfaces (next-event estimation over the cone they subtend),
// and then not counted again when a diffuse bounce happens to hit them.
// Russian roulette from the fourth bounce keeps long paths cheap.

#include <cstdint>

#include "pool/render/geometry.hpp"
#include "pool/render/math.hpp"

namespace runsnack::render {

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

namespace tracer {

inline constexpr float kFar = 1e30f;
inline constexpr float kRayOffset = 1e-4f;  // pushes a bounced ray off its surface
inline constexpr float kTMin = 1e-6f;
inline constexpr int kStackSize = 64;       // bvh.cpp keeps the tree shallower than this
inline constexpr int kMaxRejectionTries = 64;

RUNSNACK_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// splitmix64 over a per-sample key.
struct Rng {
  std::uint64_t state;
  RUNSNACK_HD float next() {
    state += 0x9e3779b97f4a7c15ull;
    // 24 random bits give every float in [0, 1) at spacing 2^-24, exactly.
    return static_cast<float>(static_cast<std::uint32_t>(mix64(state) >> 40)) * (1.0f / 16777216.0f);
  }
};

RUNSNACK_HD inline Rng sample_rng(std::uint64_t seed, std::int32_t x, std::int32_t y, std::int32_t sample) {
  std::uint64_t key = mix64(seed ^ 0x52534e4b52454e44ull);
  key = mix64(key ^ ((static_cast<std::uint64_t>(static_cast<std::uint32_t>(x)) << 32) |
                     static_cast<std::uint32_t>(y)));
  key = mix64(key ^ static_cast<std::uint32_t>(sample));
  return Rng{key};
}

// A uniform point in the unit disk; (0, 0) in the (about 1e-43) case that
// every try falls outside.
RUNSNACK_HD inline void disk_point(Rng& rng, float& a, float& b) {
  for (int i = 0; i < kMaxRejectionTries; ++i) {
    a = 2.0f * rng.next() - 1.0f;
    b = 2.0f * rng.next() - 1.0f;
    float r2 = a * a + b * b;
    if (r2 <= 1.0f) return;
  }
  a = 0;
  b = 0;
}

// A uniform direction on the unit circle, as (cos, sin).
RUNSNACK_HD inline void circle_point(Rng& rng, float& c, float& s) {
  for (int i = 0; i < kMaxRejectionTries; ++i) {
    float a = 2.0f * rng.next() - 1.0f;
    float b = 2.0f * rng.next() - 1.0f;
    float r2 = a * a + b * b;
    if (r2 <= 1.0f && r2 > 1e-8f) {
      float inv = 1.0f / sqrtf(r2);
      c = a * inv;
      s = b * inv;
      return;
    }
  }
  c = 1;
  s = 0;
}

// Two unit vectors completing unit `n` to an orthonormal basis (Duff et al. 2017).
RUNSNACK_HD inline void basis(Vec3 n, Vec3& t1, Vec3& t2) {
  float sign = n.z >= 0.0f ? 1.0f : -1.0f;
  float a = -1.0f / (sign + n.z);
  float b = n.x * n.y * a;
  t1 = Vec3{1.0f + sign * n.x * n.x * a, sign * b, -sign * n.x};
  t2 = Vec3{b, sign + n.y * n.y * a, -n.y};
}

RUNSNACK_HD inline Vec3 reflect(Vec3 d, Vec3 n) { return d - n * (2.0f * dot(d, n)); }

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

// The nearest hit along o + t d, t > kTMin; false when the ray escapes.
RUNSNACK_HD inline bool intersect(const SceneView& s, Vec3 o, Vec3 d, Hit& hit) {
  hit = Hit{};
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

RUNSNACK_HD inline Vec3 background(const SceneView& s, Vec3 d) {
  float t = 0.5f * (d.y + 1.0f);
  return s.background.bottom * (1.0f - t) + s.background.top * t;
}

// Direct light at `p` (normal `n`) from one emissive sphere chosen at random,
// divided by the chance of choosing it; the caller multiplies by the albedo.
RUNSNACK_HD inline Vec3 sample_light(const SceneView& s, Vec3 p, Vec3 n, Rng& rng) {
  std::int32_t pick = static_cast<std::int32_t>(rng.next() * static_cast<float>(s.num_lights));
  if (pick >= s.num_lights) pick = s.num_lights - 1;
  std::int32_t li = s.lights[pick];
  const Sphere& light = s.spheres[li];
  Vec3 to = light.center - p;
  float dist2 = dot(to, to);
  float r2 = light.radius * light.radius;
  float u = rng.next();
  float ca, sa;
  circle_point(rng, ca, sa);
  if (dist2 <= r2) return Vec3{};
  float sin2_max = r2 / dist2;
  float cos_max = sqrtf(1.0f - sin2_max);
  float one_minus_cos_max = sin2_max / (1.0f + cos_max);  // 1 - cos_max without cancellation
  float cos_t = 1.0f - u * one_minus_cos_max;
  float sin_t = sqrtf(max_f(0.0f, 1.0f - cos_t * cos_t));
  Vec3 w = to * (1.0f / sqrtf(dist2));
  Vec3 t1, t2;
  basis(w, t1, t2);
  Vec3 dir = normalize(t1 * (ca * sin_t) + t2 * (sa * sin_t) + w * cos_t);
  float cos_n = dot(dir, n);
  if (cos_n <= 0.0f) return Vec3{};
  Hit shadow;
  if (!intersect(s, p, dir, shadow) || shadow.kind != kSphere || shadow.index != li) return Vec3{};
  const Material& m = s.materials[light.material];
  // (albedo / pi) * L * cos / pdf, pdf = 1 / (2 pi (1 - cos_max)), albedo applied by the caller.
  return m.color * (m.strength * cos_n * 2.0f * one_minus_cos_max * static_cast<float>(s.num_lights));
}

// Radiance along one camera ray.
RUNSNACK_HD inline Vec3 trace_path(const SceneView& s, Vec3 o, Vec3 d, Rng& rng) {
  Vec3 radiance{}, throughput{1.0f, 1.0f, 1.0f};
  bool count_sphere_lights = true;
  for (std::int32_t depth = 0; depth < s.max_depth; ++depth) {
    Hit hit;
    if (!intersect(s, o, d, hit)) {
      radiance = radiance + throughput * background(s, d);
      break;
    }
    Vec3 p = o + d * hit.t;
    const Material& m = s.materials[hit_material(s, hit)];
    if (m.kind == MaterialKind::emissive) {
      if (count_sphere_lights || hit.kind != kSphere) radiance = radiance + throughput * m.color * m.strength;
      break;
    }
    Vec3 n = hit_normal(s, hit, p);
    bool front = dot(d, n) < 0.0f;
    Vec3 nf = front ? n : -n;  // faces the incoming ray
    if (m.kind == MaterialKind::diffuse) {
      Vec3 q = p + nf * kRayOffset;
      if (s.num_lights > 0) radiance = radiance + throughput * m.color * sample_light(s, q, nf, rng);
      float a, b;
      disk_point(rng, a, b);
      float z = sqrtf(max_f(0.0f, 1.0f - a * a - b * b));
      Vec3 t1, t2;
      basis(nf, t1, t2);
      d = normalize(t1 * a + t2 * b + nf * z);
      o = q;
      throughput = throughput * m.color;
      count_sphere_lights = s.num_lights == 0;
    } else if (m.kind == MaterialKind::mirror) {
      d = normalize(reflect(d, nf));
      o = p + nf * kRayOffset;
      throughput = throughput * m.color;
      count_sphere_lights = true;
    } else {  // glass
      float eta = front ? 1.0f / m.ior : m.ior;
      float cos_i = min_f(-dot(d, nf), 1.0f);
      float sin2_t = eta * eta * (1.0f - cos_i * cos_i);
      float r0 = (1.0f - m.ior) / (1.0f + m.ior);
      r0 = r0 * r0;
      float x = 1.0f - cos_i;
      float fresnel = r0 + (1.0f - r0) * (x * x * x * x * x);
      float choice = rng.next();
      if (sin2_t > 1.0f || choice < fresnel) {
        d = normalize(reflect(d, nf));
        o = p + nf * kRayOffset;
      } else {
        d = normalize(d * eta + nf * (eta * cos_i - sqrtf(1.0f - sin2_t)));
        o = p - nf * kRayOffset;
      }
      throughput = throughput * m.color;
      count_sphere_lights = true;
    }
    if (depth >= 3) {
      float keep = min_f(max_component(throughput), 1.0f);
      if (keep < 0.05f) keep = 0.05f;
      if (rng.next() >= keep) break;
      throughput = throughput * (1.0f / keep);
    }
  }
  return radiance;
}

// One sample of pixel (x, y): a jittered ray through the pixel and the lens.
RUNSNACK_HD inline Vec3 render_sample(const SceneView& s, std::int32_t x, std::int32_t y, std::int32_t sample) {
  Rng rng = sample_rng(s.seed, x, y, sample);
  float jx = rng.next(), jy = rng.next();
  float su = (static_cast<float>(x) + jx) / static_cast<float>(s.width);
  float sv = 1.0f - (static_cast<float>(y) + jy) / static_cast<float>(s.height);
  const CameraFrame& c = s.camera;
  Vec3 origin = c.origin;
  if (c.lens_radius > 0.0f) {
    float a, b;
    disk_point(rng, a, b);
    origin = origin + c.u * (a * c.lens_radius) + c.v * (b * c.lens_radius);
  }
  Vec3 d = normalize(c.lower_left + c.horizontal * su + c.vertical * sv - origin);
  Vec3 l = trace_path(s, origin, d, rng);
  // A degenerate path (NaN or infinity) would poison the pixel's mean; drop it.
  if (!(l.x == l.x && l.y == l.y && l.z == l.z) || l.x > 1e30f || l.y > 1e30f || l.z > 1e30f) return Vec3{};
  return l;
}

// Adds samples [first, last) of pixel (x, y) to `sum`, in order: the CPU
// calls it once per pixel, the GPU once per launch, and both add the same
// floats in the same order.
RUNSNACK_HD inline Vec3 accumulate_samples(const SceneView& s, std::int32_t x, std::int32_t y,
                                           std::int32_t first, std::int32_t last, Vec3 sum) {
  for (std::int32_t k = first; k < last; ++k) sum = sum + render_sample(s, x, y, k);
  return sum;
}

// A pixel's linear value: the mean of its samples' sum.
RUNSNACK_HD inline Vec3 sample_mean(Vec3 sum, std::int32_t spp) {
  return sum * (1.0f / static_cast<float>(spp));
}

}  // namespace tracer
}  // namespace runsnack::render
