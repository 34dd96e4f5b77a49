#pragma once
// The path tracer itself, one sample at a time, shared word for word by the
// CPU renderer (render.cpp) and the CUDA kernel (cuda/gpu_kernel.cu). Browser
// workers run a WGSL port (dashboard/www/render_webgpu.wgsl.js): change both.
//
// Determinism: random numbers come from rng.hpp, keyed by pixel and sample;
// the maths keeps to IEEE basic operations (math.hpp).
//
// Light transport: diffuse, mirror and glass (Schlick Fresnel) surfaces;
// emissive surfaces end a path. Emissive spheres are also sampled directly
// from diffuse surfaces (next-event estimation over the cone they subtend),
// and then not counted again when a diffuse bounce happens to hit them.
// Russian roulette from the fourth bounce keeps long paths cheap.

#include <cstdint>

#include "pool/render/geometry.hpp"
#include "pool/render/intersect.hpp"
#include "pool/render/math.hpp"
#include "pool/render/rng.hpp"

namespace runsnack::render::tracer {

inline constexpr float kRayOffset = 1e-4f;  // pushes a bounced ray off its surface

RUNSNACK_HD inline Vec3 reflect(Vec3 d, Vec3 n) { return d - n * (2.0f * dot(d, n)); }

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
  // The light's near side is closer than its centre: nothing farther matters.
  Hit shadow;
  if (!intersect(s, p, dir, shadow, sqrtf(dist2)) || shadow.kind != kSphere || shadow.index != li)
    return Vec3{};
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
RUNSNACK_HD inline Vec3 render_sample(const SceneView& s, std::int32_t x, std::int32_t y,
                                      std::int32_t sample) {
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

}  // namespace runsnack::render::tracer
