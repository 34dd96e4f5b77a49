#pragma once
// Small float vector math shared by the CPU tracer and the CUDA kernel.
//
// Both compile the same source, so every operation here is a plain IEEE
// add, multiply, divide or square root in a fixed order: no transcendental
// functions, no std::min/max (their NaN rules differ from CUDA's fminf).
// With floating-point contraction off on both sides (-ffp-contract=off,
// nvcc --fmad=false) the CPU and GPU compute the same bits.

#if defined(__CUDACC__)
#define RUNSNACK_HD __host__ __device__
#else
#define RUNSNACK_HD
#endif

#include <cmath>

namespace runsnack::render {

struct Vec3 {
  float x = 0, y = 0, z = 0;
};

RUNSNACK_HD inline Vec3 operator+(Vec3 a, Vec3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
RUNSNACK_HD inline Vec3 operator-(Vec3 a, Vec3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
RUNSNACK_HD inline Vec3 operator-(Vec3 a) { return {-a.x, -a.y, -a.z}; }
RUNSNACK_HD inline Vec3 operator*(Vec3 a, Vec3 b) { return {a.x * b.x, a.y * b.y, a.z * b.z}; }
RUNSNACK_HD inline Vec3 operator*(Vec3 a, float s) { return {a.x * s, a.y * s, a.z * s}; }
RUNSNACK_HD inline Vec3 operator*(float s, Vec3 a) { return {a.x * s, a.y * s, a.z * s}; }
RUNSNACK_HD inline float dot(Vec3 a, Vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
RUNSNACK_HD inline Vec3 cross(Vec3 a, Vec3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
RUNSNACK_HD inline float min_f(float a, float b) { return a < b ? a : b; }
RUNSNACK_HD inline float max_f(float a, float b) { return a > b ? a : b; }
RUNSNACK_HD inline float max_component(Vec3 a) { return max_f(a.x, max_f(a.y, a.z)); }
RUNSNACK_HD inline float length(Vec3 a) { return sqrtf(dot(a, a)); }
RUNSNACK_HD inline Vec3 normalize(Vec3 a) {
  float inv = 1.0f / sqrtf(dot(a, a));
  return a * inv;
}
RUNSNACK_HD inline float component(Vec3 a, int axis) { return axis == 0 ? a.x : (axis == 1 ? a.y : a.z); }
RUNSNACK_HD inline Vec3 min_v(Vec3 a, Vec3 b) { return {min_f(a.x, b.x), min_f(a.y, b.y), min_f(a.z, b.z)}; }
RUNSNACK_HD inline Vec3 max_v(Vec3 a, Vec3 b) { return {max_f(a.x, b.x), max_f(a.y, b.y), max_f(a.z, b.z)}; }

}  // namespace runsnack::render
