#pragma once
// The environment a provider's cuda-server starts with: the provider's own,
// minus what would make the server load RunSnack's CUDA shim instead of the
// real driver (a cuda-shim folder on LD_LIBRARY_PATH, RUNSNACK_CUDA_SOCKET),
// plus the grant's GPUs as CUDA_VISIBLE_DEVICES. Pure, so it is tested
// without starting anything.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::cuda {

// The name of the build folder that holds the shim (${CMAKE_BINARY_DIR}/cuda-shim).
inline constexpr const char* kShimDirName = "cuda-shim";

// `environ`: "KEY=VALUE" entries. `shim_dir`: where this installation's shim
// lives, if found; entries naming it, or any folder called kShimDirName,
// leave LD_LIBRARY_PATH. `gpus`: the GPUs the grant lets the server see
// (an empty list: none); nullopt leaves the provider's CUDA_VISIBLE_DEVICES
// as it is (the grant shares them all).
std::vector<std::string> server_environment(const std::vector<std::string>& environ,
                                            const std::optional<std::filesystem::path>& shim_dir,
                                            const std::optional<std::vector<int>>& gpus);

// What of `env` ("KEY=VALUE") reaches a server in the sandbox: the library path, the driver's and
// CUDA's own settings (CUDA_*, NVIDIA_*, __GL_*), RUNSNACK_CUDA_BACKEND, and the sanitizers'
// options of a test build; nothing else of the provider's environment (its secrets, its paths).
std::vector<std::string> sandboxed_server_environment(const std::vector<std::string>& env);

// LD_LIBRARY_PATH's value without shim folders (see above); empty entries dropped.
std::string strip_shim_dirs(const std::string& library_path, const std::optional<std::filesystem::path>& shim_dir);

}  // namespace runsnack::cuda
