#pragma once
// The boundary between the C++ library and the CUDA translation unit
// (cuda/gpu_kernel.cu, or gpu_kernel_none.cpp in builds without CUDA). Kept
// free of Boost and of the library's other headers so nvcc compiles little.

#include <cstdint>
#include <string>

#include "pool/render/geometry.hpp"

namespace runsnack::render::gpu {

// Array lengths the SceneView does not carry.
struct SceneSizes {
  std::int32_t materials = 0;
  std::int32_t triangles = 0;
  std::int32_t refs = 0;
};

bool compiled();
bool available();

// Renders columns [x, x + w) and rows [y, y + h) of `host_view` (pointers to
// host memory) with `spp` samples per pixel, writing w * h * 3 linear floats
// (the sample means) to `out`. Returns "" on success, else CUDA's error.
std::string render_linear(const SceneView& host_view, const SceneSizes& sizes, int x, int y, int w, int h,
                          int spp, float* out);

}  // namespace runsnack::render::gpu
