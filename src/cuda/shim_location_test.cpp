#include "cuda/shim_location.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace runsnack::cuda {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("rs-shimloc-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
  fs::path shim(const fs::path& rel) {
    fs::create_directories(dir / rel);
    std::ofstream(dir / rel / "libcuda.so.1") << "x";
    return dir / rel;
  }
};

TEST(CudaShimLocation, EnvironmentOverrideMustHoldTheShim) {
  Scratch s;
  fs::path lib = s.dir / "lib";
  fs::create_directories(lib);
  EXPECT_FALSE(find_cuda_shim_dir(s.dir / "build/src/cli/runsnack", lib.c_str(), std::nullopt));
  s.shim("lib");
  EXPECT_EQ(find_cuda_shim_dir(s.dir / "build/src/cli/runsnack", lib.c_str(), std::nullopt), lib);
  // Also through the real environment.
  ::setenv("RUNSNACK_CUDA_LIBDIR", lib.c_str(), 1);
  EXPECT_EQ(find_cuda_shim_dir(), lib);
  ::unsetenv("RUNSNACK_CUDA_LIBDIR");
}

TEST(CudaShimLocation, InstalledBinaryUsesPrefixLibRunsnack) {
  Scratch s;
  fs::path installed = s.shim("usr/lib/runsnack");
  EXPECT_EQ(find_cuda_shim_dir(s.dir / "usr/bin/runsnack", nullptr, std::nullopt), installed);
}

TEST(CudaShimLocation, InstalledBinaryNeverFallsBackToABuildTree) {
  Scratch s;
  fs::path configured = s.shim("build/cuda-shim");
  fs::create_directories(s.dir / "usr/bin");
  EXPECT_FALSE(find_cuda_shim_dir(s.dir / "usr/bin/runsnack", nullptr, configured));
}

TEST(CudaShimLocation, BuildTreeBinaryUsesItsTree) {
  Scratch s;
  fs::path tree = s.shim("build/dev/cuda-shim");
  EXPECT_EQ(find_cuda_shim_dir(s.dir / "build/dev/src/cli/runsnack", nullptr, std::nullopt), tree);
  fs::path configured = s.shim("other/cuda-shim");
  EXPECT_EQ(find_cuda_shim_dir(s.dir / "build/x/tests/prog", nullptr, configured), configured);
}

}  // namespace
}  // namespace runsnack::cuda
