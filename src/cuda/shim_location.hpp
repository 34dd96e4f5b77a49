// Where the runsnack binary finds the CUDA driver shim (libcuda.so.1 and
// libnvidia-ml.so.1) to put first on a child's library path.
#pragma once

#include <filesystem>
#include <optional>

namespace runsnack::cuda {

// $RUNSNACK_CUDA_LIBDIR when set, else <dir of /proc/self/exe>/../../cuda-shim
// (build tree: build/X/src/cli/runsnack -> build/X/cuda-shim), else the
// directory the build configured (RUNSNACK_CUDA_SHIM_DIR). Only a directory
// that holds libcuda.so.1 counts.
std::optional<std::filesystem::path> find_cuda_shim_dir();

}  // namespace runsnack::cuda
