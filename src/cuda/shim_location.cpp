#include "cuda/shim_location.hpp"

#include <cstdlib>
#include <system_error>

namespace runsnack::cuda {

std::optional<std::filesystem::path> find_cuda_shim_dir() {
  namespace fs = std::filesystem;
  auto holds_shim = [](const fs::path& dir) {
    std::error_code ec;
    return fs::exists(dir / "libcuda.so.1", ec);
  };
  if (const char* env = std::getenv("RUNSNACK_CUDA_LIBDIR"); env != nullptr && *env != '\0') {
    if (holds_shim(env)) return fs::path(env);
    return std::nullopt;  // an explicit choice that is wrong is not silently replaced
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = (exe.parent_path() / ".." / ".." / "cuda-shim").lexically_normal();
    if (holds_shim(dir)) return dir;
  }
#ifdef RUNSNACK_CUDA_SHIM_DIR
  if (holds_shim(RUNSNACK_CUDA_SHIM_DIR)) return fs::path(RUNSNACK_CUDA_SHIM_DIR);
#endif
  return std::nullopt;
}

}  // namespace runsnack::cuda
