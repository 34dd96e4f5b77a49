#pragma once
// The tracer's random numbers and the sampling built on them, shared by the
// CPU and the CUDA kernel (tracer.hpp).
//
// Counter-based: a sample's generator is keyed by (seed, x, y, sample index)
// alone, so a pixel's value does not depend on which rectangle, thread or
// device rendered it. Points on disks and circles come from rejection
// sampling rather than sin/cos, so CPU and GPU compute the same bits.

#include <cstdint>

#include "pool/render/math.hpp"

namespace runsnack::render::tracer {

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

}  // namespace runsnack::render::tracer
