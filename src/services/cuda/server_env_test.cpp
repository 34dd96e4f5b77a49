#include "services/cuda/server_env.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace runsnack::cuda {
namespace {

std::optional<std::string> value(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& e : env)
    if (e.starts_with(key + "=")) return e.substr(key.size() + 1);
  return std::nullopt;
}

TEST(ServerEnv, ShimFoldersLeaveTheLibraryPath) {
  EXPECT_EQ(strip_shim_dirs("/a:/build/dev/cuda-shim:/b", std::nullopt), "/a:/b");
  EXPECT_EQ(strip_shim_dirs("/build/dev/cuda-shim/::/usr/lib", std::nullopt), "/usr/lib");
  EXPECT_EQ(strip_shim_dirs("/opt/myshim:/usr/lib", std::filesystem::path("/opt/myshim/")), "/usr/lib");
  EXPECT_EQ(strip_shim_dirs("/usr/local/cuda/lib64", std::nullopt), "/usr/local/cuda/lib64");
  EXPECT_EQ(strip_shim_dirs("", std::nullopt), "");
}

TEST(ServerEnv, DropsTheSocketAndShimKeepsTheRest) {
  auto env = server_environment({"PATH=/bin", "RUNSNACK_CUDA_SOCKET=/tmp/x/s", "LD_LIBRARY_PATH=/x/cuda-shim",
                                 "RUNSNACK_CUDA_BACKEND=host", "CUDA_VISIBLE_DEVICES=1", "junk"},
                                std::nullopt, std::nullopt);
  EXPECT_EQ(value(env, "PATH"), "/bin");
  EXPECT_EQ(value(env, "RUNSNACK_CUDA_SOCKET"), std::nullopt);
  EXPECT_EQ(value(env, "LD_LIBRARY_PATH"), std::nullopt);  // nothing left: unset
  EXPECT_EQ(value(env, "RUNSNACK_CUDA_BACKEND"), "host");
  EXPECT_EQ(value(env, "CUDA_VISIBLE_DEVICES"), "1");  // a grant of all GPUs leaves the provider's choice
  EXPECT_EQ(value(env, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](const auto& e) { return e == "junk"; }), 0);
}

TEST(ServerEnv, GrantGpusBecomeVisibleDevices) {
  auto env = server_environment({"CUDA_VISIBLE_DEVICES=0,1,2,3"}, std::nullopt, std::vector<int>{2, 3});
  EXPECT_EQ(value(env, "CUDA_VISIBLE_DEVICES"), "2,3");
  auto none = server_environment({"CUDA_VISIBLE_DEVICES=0"}, std::nullopt, std::vector<int>{});
  EXPECT_EQ(value(none, "CUDA_VISIBLE_DEVICES"), "");  // the grant's GPUs are not on this host: none visible
}

TEST(ServerEnv, SandboxKeepsOnlyWhatTheDriverNeeds) {
  auto env = sandboxed_server_environment({"LD_LIBRARY_PATH=/usr/lib/nvidia", "CUDA_CACHE_PATH=/x", "NVIDIA_DRIVER=1",
                                           "RUNSNACK_CUDA_BACKEND=host", "AWS_SECRET_ACCESS_KEY=s", "HOME=/root",
                                           "RUNSNACK_HOME=/state", "ASAN_OPTIONS=detect_leaks=1"});
  EXPECT_EQ(value(env, "LD_LIBRARY_PATH"), "/usr/lib/nvidia");
  EXPECT_EQ(value(env, "RUNSNACK_CUDA_BACKEND"), "host");
  EXPECT_EQ(value(env, "CUDA_CACHE_PATH"), "/x");
  EXPECT_EQ(value(env, "ASAN_OPTIONS"), "detect_leaks=1");
  EXPECT_EQ(env.size(), 5u);  // not the secret, HOME or the state folder
}

}  // namespace
}  // namespace runsnack::cuda
