// Where the runsnack binary finds the CUDA driver shim (libcuda.so.1 and
// libnvidia-ml.so.1) to put first on a child's library path.
#pragma once

#include <filesystem>
#include <optional>

namespace runsnack::cuda {

// In order, and only a directory that holds libcuda.so.1 counts:
//   1. $RUNSNACK_CUDA_LIBDIR when set (an explicit choice that is wrong is not
//      replaced by another);
//   2. an installed binary, PREFIX/bin/runsnack: PREFIX/lib/runsnack
//      (/usr/lib/runsnack for the Debian package), and nothing else: an
//      installed binary never loads code from a build tree;
//   3. a build tree, build/X/src/cli/runsnack: build/X/cuda-shim;
//   4. the build tree this binary was configured in (RUNSNACK_CUDA_SHIM_DIR),
//      for test programs that live elsewhere in it.
std::optional<std::filesystem::path> find_cuda_shim_dir();

// The same rule for a binary at `exe`, with `env_dir` standing for
// $RUNSNACK_CUDA_LIBDIR and `configured` for step 4 (tests).
std::optional<std::filesystem::path> find_cuda_shim_dir(const std::filesystem::path& exe, const char* env_dir,
                                                        const std::optional<std::filesystem::path>& configured);

}  // namespace runsnack::cuda
