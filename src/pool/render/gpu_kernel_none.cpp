// The GPU boundary (gpu_kernel.hpp) in a build without the CUDA toolkit.
#include "pool/render/gpu_kernel.hpp"

namespace runsnack::render::gpu {

bool compiled() { return false; }
bool available() { return false; }

std::string render_linear(const SceneView&, const SceneSizes&, int, int, int, int, int, float*) {
  return "this build has no CUDA support";
}

}  // namespace runsnack::render::gpu
