#include "cuda/shim_location.hpp"

#include <cstdlib>
#include <system_error>

namespace runsnack::cuda {

namespace fs = std::filesystem;

namespace {

bool holds_shim(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "libcuda.so.1", ec);
}

}  // namespace

std::optional<fs::path> find_cuda_shim_dir(const fs::path& exe, const char* env_dir,
                                           const std::optional<fs::path>& configured) {
  if (env_dir != nullptr && *env_dir != '\0') {
    if (holds_shim(env_dir)) return fs::path(env_dir);
    return std::nullopt;
  }
  if (!exe.empty()) {
    fs::path bin = exe.parent_path();
    if (bin.filename() == "bin") {
      fs::path installed = bin.parent_path() / "lib" / "runsnack";
      if (holds_shim(installed)) return installed;
      return std::nullopt;
    }
    fs::path build = (bin / ".." / ".." / "cuda-shim").lexically_normal();
    if (holds_shim(build)) return build;
  }
  if (configured && holds_shim(*configured)) return *configured;
  return std::nullopt;
}

std::optional<fs::path> find_cuda_shim_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) exe.clear();
  std::optional<fs::path> configured;
#ifdef RUNSNACK_CUDA_SHIM_DIR
  configured = fs::path(RUNSNACK_CUDA_SHIM_DIR);
#endif
  return find_cuda_shim_dir(exe, std::getenv("RUNSNACK_CUDA_LIBDIR"), configured);
}

}  // namespace runsnack::cuda
