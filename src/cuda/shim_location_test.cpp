#include "cuda/shim_location.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace runsnack::cuda {
namespace {

namespace fs = std::filesystem;

TEST(CudaShimLocation, EnvironmentOverrideMustHoldTheShim) {
  fs::path dir = fs::temp_directory_path() / ("rs-shimloc-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ::setenv("RUNSNACK_CUDA_LIBDIR", dir.c_str(), 1);
  EXPECT_FALSE(find_cuda_shim_dir());  // no libcuda.so.1 there: not silently replaced
  std::ofstream(dir / "libcuda.so.1") << "x";
  auto found = find_cuda_shim_dir();
  ASSERT_TRUE(found);
  EXPECT_EQ(*found, dir);
  ::unsetenv("RUNSNACK_CUDA_LIBDIR");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace runsnack::cuda
