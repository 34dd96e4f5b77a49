// The shim against serve_cuda(HostBackend): in-process through dlopen, and
// nvcc-built programs (static cudart, cuBLAS) run with the shim first on
// their library path. Skipped when the build found no nvcc.
#include "cuda/server/driver_backend.hpp"
#include "cuda/server/host_backend.hpp"
#include "cuda/server/serve.hpp"
#include "cuda/wire.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace runsnack::cuda {
namespace {

namespace fs = std::filesystem;

// Serves every connection to a unix socket in a temp dir with one HostBackend.
class HostServer {
 public:
  HostServer() {
    dir_ = fs::temp_directory_path() / ("rs-cuda-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_);
    path_ = (dir_ / "s").string();
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path_.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    thread_ = std::thread([this] { run(); });
  }
  ~HostServer() {
    stop();
    fs::remove_all(dir_);
  }
  void stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    // A client that keeps its connection (the in-process shim) must not block the join.
    if (int c = client_.load(); c >= 0) ::shutdown(c, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  const std::string& path() const { return path_; }
  HostBackend& backend() { return backend_; }
  int connections() const { return connections_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      ++connections_;
      client_ = c;
      if (stop_) ::shutdown(c, SHUT_RDWR);
      serve_cuda(c, backend_);  // one client at a time is all these tests make
      client_ = -1;
      ::close(c);
    }
  }
  static inline int counter_ = 0;
  fs::path dir_;
  std::string path_;
  int fd_ = -1;
  HostBackend backend_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> client_{-1};
};

struct ProgramRun {
  int status = -1;
  std::string output;  // stdout and stderr together
};

ProgramRun run_with_shim(const std::string& program, const std::string& socket) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view v(*e);
    if (v.starts_with("LD_LIBRARY_PATH=") || v.starts_with("RUNSNACK_CUDA_")) continue;
    env.emplace_back(*e);
  }
  env.push_back(std::string("LD_LIBRARY_PATH=") + RUNSNACK_CUDA_SHIM_DIR);
  if (!socket.empty()) env.push_back("RUNSNACK_CUDA_SOCKET=" + socket);
  env.push_back("RUNSNACK_CUDA_STRICT=1");  // any unknown name or table aborts the program
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string out = (fs::temp_directory_path() / ("rs-cuda-out-" + std::to_string(::getpid()))).string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::string prog = program;
  char* argv[] = {prog.data(), nullptr};
  pid_t pid = 0;
  ProgramRun r;
  if (posix_spawn(&pid, prog.c_str(), &fa, nullptr, argv, envp.data()) != 0) return r;
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  fs::remove(out);
  return r;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

#ifdef RUNSNACK_CUDA_TEST_PROGRAMS
const std::string kPrograms = RUNSNACK_CUDA_TEST_PROGRAMS;
#define NEED_NVCC()
#else
const std::string kPrograms;
#define NEED_NVCC() GTEST_SKIP() << "no nvcc: the CUDA test programs were not built"
#endif

// The size the shim sends must be the whole image and nothing after it, for
// each form nvcc produces: fatbin, ELF cubin, PTX text (with its NUL).
TEST(CudaShim, ImageSizesOfNvccBuiltFatbinCubinAndPtx) {
  NEED_NVCC();
  for (const char* name : {"vector_add.fatbin", "vector_add.cubin", "vector_add.ptx"}) {
    std::ifstream in(kPrograms + "/" + name, std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(data.size(), 16u) << name;
    bool ptx = std::string_view(name).ends_with(".ptx");
    std::vector<char> padded = data;
    if (ptx) padded.push_back('\0');
    std::size_t want = padded.size();
    padded.resize(padded.size() + 64, 0x7f);  // bytes after the image must not count
    EXPECT_EQ(wire::image_size(padded.data()), want) << name;
  }
}

// The shim loaded into this process: device queries, memory, copies, memset.
TEST(CudaShim, HostRoundTripInProcess) {
  HostServer server;
  ::setenv("RUNSNACK_CUDA_SOCKET", server.path().c_str(), 1);
  void* lib = ::dlopen(RUNSNACK_CUDA_SHIM_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  ASSERT_NE(::dlsym(lib, "runsnack_cuda_shim_marker"), nullptr);
  using Init = int (*)(unsigned);
  using GetName = int (*)(char*, int, int);
  using Retain = int (*)(void**, int);
  using SetCurrent = int (*)(void*);
  using Alloc = int (*)(std::uint64_t*, std::size_t);
  using HtoD = int (*)(std::uint64_t, const void*, std::size_t);
  using DtoH = int (*)(void*, std::uint64_t, std::size_t);
  using Memset = int (*)(std::uint64_t, unsigned, std::size_t);
  using Free = int (*)(std::uint64_t);
  using ProcAddr = int (*)(const char*, void**, int, std::uint64_t, int*);
  auto sym = [&](const char* n) { return ::dlsym(lib, n); };
  ASSERT_EQ(reinterpret_cast<Init>(sym("cuInit"))(0), 0);
  char name[256];
  ASSERT_EQ(reinterpret_cast<GetName>(sym("cuDeviceGetName"))(name, sizeof name, 0), 0);
  EXPECT_STREQ(name, HostBackend::kDeviceName);
  void* ctx = nullptr;
  ASSERT_EQ(reinterpret_cast<Retain>(sym("cuDevicePrimaryCtxRetain"))(&ctx, 0), 0);
  ASSERT_EQ(reinterpret_cast<SetCurrent>(sym("cuCtxSetCurrent"))(ctx), 0);

  // cuGetProcAddress picks the versioned and per-thread entries.
  auto proc = reinterpret_cast<ProcAddr>(sym("cuGetProcAddress_v2"));
  void* fn = nullptr;
  int status = -1;
  ASSERT_EQ(proc("cuMemAlloc", &fn, 12000, 0, &status), 0);
  EXPECT_EQ(fn, sym("cuMemAlloc_v2"));
  ASSERT_EQ(proc("cuMemcpyHtoD", &fn, 12000, 2 /* per-thread */, &status), 0);
  EXPECT_EQ(fn, sym("cuMemcpyHtoD_v2_ptds"));
  ASSERT_EQ(proc("cuMemcpyHtoD", &fn, 12000, 0, &status), 0);
  EXPECT_EQ(fn, sym("cuMemcpyHtoD_v2"));
  EXPECT_EQ(proc("cuMemAlloc", &fn, 1000, 0, &status), 500);  // CUDA_ERROR_NOT_FOUND: too old
  EXPECT_EQ(status, 2);                                        // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT

  const std::size_t n = 3 * wire::kChunk + 123;  // several chunks
  std::vector<std::uint8_t> data(n), back(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<std::uint8_t>(i * 7);
  std::uint64_t p = 0;
  ASSERT_EQ(reinterpret_cast<Alloc>(sym("cuMemAlloc_v2"))(&p, n), 0);
  ASSERT_EQ(reinterpret_cast<HtoD>(sym("cuMemcpyHtoD_v2"))(p, data.data(), n), 0);
  ASSERT_EQ(reinterpret_cast<Memset>(sym("cuMemsetD8_v2"))(p + 10, 0xab, 5), 0);
  ASSERT_EQ(reinterpret_cast<DtoH>(sym("cuMemcpyDtoH_v2"))(back.data(), p, n), 0);
  for (std::size_t i = 10; i < 15; ++i) data[i] = 0xab;
  EXPECT_TRUE(back == data);
  ASSERT_EQ(reinterpret_cast<Free>(sym("cuMemFree_v2"))(p), 0);
  // The free is fire-and-forget; a synchronous call proves it ran.
  void* ctx2 = nullptr;
  ASSERT_EQ(reinterpret_cast<Retain>(sym("cuDevicePrimaryCtxRetain"))(&ctx2, 0), 0);
  auto calls = server.backend().calls();
  std::vector<std::string> want = {"init", "primary_ctx_retain", "mem_alloc " + std::to_string(n),
                                   "memcpy_htod 1048576", "memcpy_htod 1048576", "memcpy_htod 1048576",
                                   "memcpy_htod 123", "memset 1x5", "memcpy_dtoh 1048576", "memcpy_dtoh 1048576",
                                   "memcpy_dtoh 1048576", "memcpy_dtoh 123", "mem_free " + std::to_string(n),
                                   "primary_ctx_retain"};
  EXPECT_EQ(calls, want);
  ::unsetenv("RUNSNACK_CUDA_SOCKET");
  // The library stays loaded: its connection lives until this process exits.
}

// The key CI test: cudart's static initialisation, the memory round
// trip and the kernel of an unmodified nvcc program; the double runs `add`
// (host_kernels.cpp), so the result checks the arguments' whole path.
TEST(CudaShim, StaticCudartProgramRunsItsKernelOnTheDouble) {
  NEED_NVCC();
  HostServer server;
  ProgramRun r = run_with_shim(kPrograms + "/vector_add", server.path());
  server.stop();
  SCOPED_TRACE(r.output);
  EXPECT_EQ(r.output.find("not implemented yet"), std::string::npos);
  EXPECT_EQ(r.output.find("unknown"), std::string::npos);
  EXPECT_NE(r.output.find(std::string("device 0: ") + HostBackend::kDeviceName + " (sm_90)"), std::string::npos);
  EXPECT_NE(r.output.find("round trip: ok"), std::string::npos);
  EXPECT_NE(r.output.find("memset result: ok"), std::string::npos);
  EXPECT_NE(r.output.find("kernel: cudaSuccess"), std::string::npos);
  EXPECT_NE(r.output.find("result: ok"), std::string::npos);
  EXPECT_EQ(r.status, 0);
  auto calls = server.backend().calls();
  // The arguments as packed by the shim (little-endian): the three device
  // pointers cudaMalloc returned (the double's first three 4 MiB allocations,
  // from 0x5e0000000000 a gap apart) and n = 2^20.
  EXPECT_TRUE(contains(calls, "launch _Z3addPKfS0_Pfi grid 4096 block 256 params 28 "
                              "00000000005e0000" "00014000005e0000" "00028000005e0000" "00001000"))
      << ::testing::PrintToString(calls);
  EXPECT_EQ(server.connections(), 1);
}

TEST(CudaShim, CublasCreateGetsThroughItsInitialisation) {
  NEED_NVCC();
  HostServer server;
  ProgramRun r = run_with_shim(kPrograms + "/cublas_create", server.path());
  server.stop();
  SCOPED_TRACE(r.output);
  SCOPED_TRACE(::testing::PrintToString(server.backend().calls()));
  EXPECT_EQ(r.output.find("not implemented yet"), std::string::npos);
  EXPECT_EQ(r.output.find("unknown"), std::string::npos);
  EXPECT_NE(r.output.find("cublasCreate: CUBLAS_STATUS_SUCCESS"), std::string::npos);
  EXPECT_EQ(r.status, 0);
}

// The server must never load our shim as "the driver", even when told to.
TEST(CudaShim, DriverBackendRefusesTheShimAndSaysWhenThereIsNoDriver) {
  for (const char* real : {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1"}) {
    if (fs::exists(real)) GTEST_SKIP() << "this machine has a driver (" << real << ")";
  }
  ::setenv("RUNSNACK_CUDA_DRIVER", RUNSNACK_CUDA_SHIM_DIR "/libcuda.so.1", 1);
  ::testing::internal::CaptureStderr();
  DriverBackend backend;
  int rc = backend.init();
  std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("RUNSNACK_CUDA_DRIVER");
  EXPECT_EQ(rc, kErrNoDevice);
  EXPECT_NE(err.find("is RunSnack's own shim, not the driver; skipped"), std::string::npos) << err;
  EXPECT_NE(err.find("no NVIDIA driver (libcuda.so.1) on this machine"), std::string::npos) << err;
}

TEST(CudaShim, NvmlAnswersFromTheRemoteDevice) {
  HostServer server;
  ProgramRun r = run_with_shim(RUNSNACK_CUDA_NVML_QUERY, server.path());
  server.stop();
  SCOPED_TRACE(r.output);
  EXPECT_NE(r.output.find(std::string("nvml rc 0 count 1 name ") + HostBackend::kDeviceName +
                          " uuid GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf total " +
                          std::to_string(HostBackend::kTotalMemory)),
            std::string::npos);
  EXPECT_EQ(r.status, 0);
}

TEST(CudaShim, WithoutASocketCuInitSaysHowToRunTheProgram) {
  NEED_NVCC();
  ProgramRun r = run_with_shim(kPrograms + "/vector_add", "");
  EXPECT_NE(r.output.find("runsnack cuda: no remote GPU (RUNSNACK_CUDA_SOCKET is not set); run the program with "
                          "`runsnack cuda LINK -- CMD`"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("device count: cudaErrorNoDevice"), std::string::npos) << r.output;
  EXPECT_EQ(r.status, 1);
}

}  // namespace
}  // namespace runsnack::cuda
