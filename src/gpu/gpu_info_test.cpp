#include "gpu/gpu_info.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "gpu/nvml.hpp"
#include "gpu/process_memory.hpp"

namespace runsnack {
namespace {

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// nvmlInit calls the fake has not seen matched by nvmlShutdown.
int fake_live_inits() {
  void* handle = ::dlopen(RUNSNACK_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!handle) return -1000;
  auto fn = reinterpret_cast<int (*)()>(::dlsym(handle, "fake_nvml_live_inits"));
  int n = fn ? fn() : -1000;
  ::dlclose(handle);
  return n;
}

TEST(QueryGpus, CpuOnlyMachineReportsNoGpu) {
  ScopedEnv env(kNvmlLibraryEnv, nullptr);
  if (void* real = ::dlopen(kNvmlDefaultLibrary, RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(real);
    GTEST_SKIP() << "this machine has NVML";
  }
  GpuReport report = query_gpus({});
  EXPECT_FALSE(report.nvml_loaded);
  EXPECT_TRUE(report.gpus.empty());
  EXPECT_EQ(report.note, "no NVIDIA GPU on this machine (libnvidia-ml.so.1 not found)");
}

TEST(QueryGpus, MissingOverrideLibrary) {
  ScopedEnv env(kNvmlLibraryEnv, "/nonexistent/libnvidia-ml.so.1");
  GpuReport report = query_gpus({});
  EXPECT_FALSE(report.nvml_loaded);
  EXPECT_TRUE(report.gpus.empty());
  EXPECT_TRUE(contains(report.note, "no NVIDIA GPU")) << report.note;
  EXPECT_TRUE(contains(report.note, "/nonexistent/libnvidia-ml.so.1 not found")) << report.note;
}

TEST(QueryGpus, LibraryThatIsNotNvml) {
  ScopedEnv env(kNvmlLibraryEnv, "libm.so.6");
  GpuReport report = query_gpus({});
  EXPECT_FALSE(report.nvml_loaded);
  EXPECT_TRUE(contains(report.note, "not a usable NVML")) << report.note;
}

TEST(QueryGpus, FakeNvmlMapsEveryField) {
  ScopedEnv env(kNvmlLibraryEnv, RUNSNACK_FAKE_NVML_PATH);
  GpuReport report = query_gpus({});
  EXPECT_TRUE(report.nvml_loaded);
  EXPECT_EQ(report.driver_version, "555.42.06");
  EXPECT_EQ(report.cuda_version, "12.5");
  EXPECT_EQ(report.note, "");
  ASSERT_EQ(report.gpus.size(), 2u);
  const GpuInfo& g0 = report.gpus[0];
  EXPECT_EQ(g0.index, 0);
  EXPECT_EQ(g0.name, "Fake GPU 0");
  EXPECT_EQ(g0.uuid, "GPU-00000000-fake-0000-0000-000000000000");
  EXPECT_EQ(g0.memory_total, 80ULL << 30);
  EXPECT_EQ(g0.memory_used, 1ULL << 30);
  EXPECT_EQ(g0.utilization_pct, 7);
  EXPECT_EQ(g0.temperature_c, 41);
  const GpuInfo& g1 = report.gpus[1];
  EXPECT_EQ(g1.index, 1);
  EXPECT_EQ(g1.name, "Fake GPU 1");
  EXPECT_EQ(g1.memory_total, 24ULL << 30);
  EXPECT_EQ(g1.memory_used, 3ULL << 30);
  EXPECT_EQ(g1.utilization_pct, 93);
  EXPECT_EQ(g1.temperature_c, 67);
  EXPECT_EQ(fake_live_inits(), 0);  // every nvmlInit was matched by nvmlShutdown
}

TEST(QueryGpus, FiltersByIndex) {
  ScopedEnv env(kNvmlLibraryEnv, RUNSNACK_FAKE_NVML_PATH);
  GpuReport one = query_gpus({1});
  ASSERT_EQ(one.gpus.size(), 1u);
  EXPECT_EQ(one.gpus[0].index, 1);
  EXPECT_EQ(one.gpus[0].name, "Fake GPU 1");
  EXPECT_EQ(one.note, "");

  GpuReport some = query_gpus({5, 1, -1, 1});
  ASSERT_EQ(some.gpus.size(), 1u);
  EXPECT_EQ(some.gpus[0].index, 1);
  EXPECT_TRUE(contains(some.note, "GPU 5 not present")) << some.note;
  EXPECT_TRUE(contains(some.note, "GPU -1 not present")) << some.note;
}

TEST(QueryGpus, InitFailureIsANote) {
  ScopedEnv env(kNvmlLibraryEnv, RUNSNACK_FAKE_NVML_PATH);
  ScopedEnv fail_init("FAKE_NVML_FAIL_INIT", "1");
  GpuReport report = query_gpus({});
  EXPECT_FALSE(report.nvml_loaded);
  EXPECT_TRUE(report.gpus.empty());
  EXPECT_TRUE(contains(report.note, "Driver Not Loaded")) << report.note;
  EXPECT_EQ(fake_live_inits(), 0);
}

TEST(QueryGpus, NoDevices) {
  ScopedEnv env(kNvmlLibraryEnv, RUNSNACK_FAKE_NVML_PATH);
  ScopedEnv none("FAKE_NVML_DEVICE_COUNT", "0");
  GpuReport report = query_gpus({});
  EXPECT_TRUE(report.nvml_loaded);
  EXPECT_TRUE(report.gpus.empty());
  EXPECT_EQ(report.note, "NVIDIA driver loaded but no GPU found");
}

TEST(QueryGpus, UnsupportedFieldIsUnknownAndNoted) {
  ScopedEnv env(kNvmlLibraryEnv, RUNSNACK_FAKE_NVML_PATH);
  ScopedEnv no_temp("FAKE_NVML_NO_TEMPERATURE", "1");
  GpuReport report = query_gpus({0});
  ASSERT_EQ(report.gpus.size(), 1u);
  EXPECT_EQ(report.gpus[0].temperature_c, -1);
  EXPECT_EQ(report.gpus[0].utilization_pct, 7);
  EXPECT_EQ(report.note, "GPU 0: no temperature reported");
}

TEST(Nvml, OpenReportsLibraryAndErrors) {
  ScopedEnv env(kNvmlLibraryEnv, RUNSNACK_FAKE_NVML_PATH);
  auto nvml = Nvml::open();
  ASSERT_TRUE(nvml) << nvml.error().what();
  EXPECT_EQ((*nvml)->library(), RUNSNACK_FAKE_NVML_PATH);
  EXPECT_EQ(*(*nvml)->device_count(), 2u);
  auto bad = (*nvml)->device(7);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().is(errc::io_error));
  EXPECT_EQ(fake_live_inits(), 1);
  nvml->reset();
  EXPECT_EQ(fake_live_inits(), 0);
}

TEST(GpuMemoryByProcess, FromNvmlComputeProcesses) {
  ScopedEnv lib(kNvmlLibraryEnv, RUNSNACK_FAKE_NVML_PATH);
  {
    // More processes than the first buffer holds (NVML asks for a bigger one), and one whose use is not told.
    std::string list = "4242:1000,4243:na";
    for (int pid = 5000; pid < 5100; ++pid) list += "," + std::to_string(pid) + ":7";
    ScopedEnv processes("FAKE_NVML_PROCESSES", list.c_str());
    auto by_pid = gpu_memory_by_process();
    ASSERT_TRUE(by_pid);
    EXPECT_EQ(by_pid->at(4242), 1000u);
    EXPECT_EQ(by_pid->at(4243), std::nullopt);  // there, but NVML does not tell how much
    EXPECT_EQ(by_pid->size(), 2u + 62u);  // the fake holds at most 64
  }
  {
    ScopedEnv none("FAKE_NVML_PROCESSES", nullptr);
    auto by_pid = gpu_memory_by_process();
    ASSERT_TRUE(by_pid);  // known: no process uses a GPU
    EXPECT_TRUE(by_pid->empty());
  }
  {
    ScopedEnv fail("FAKE_NVML_FAIL_INIT", "1");
    EXPECT_FALSE(gpu_memory_by_process());
  }
  ScopedEnv missing(kNvmlLibraryEnv, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(gpu_memory_by_process());
  EXPECT_EQ(fake_live_inits(), 0);
}

TEST(CudaVersionText, FromNvmlNumber) {
  EXPECT_EQ(cuda_version_text(12040), "12.4");
  EXPECT_EQ(cuda_version_text(11080), "11.8");
  EXPECT_EQ(cuda_version_text(12000), "12.0");
  EXPECT_EQ(cuda_version_text(0), "");
}

}  // namespace
}  // namespace runsnack
