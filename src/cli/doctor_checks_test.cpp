#include "cli/doctor_checks.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace runsnack::cli::doctor {
namespace {

TEST(DoctorGpuFix, NamesTheCauseOfEachNvmlFailure) {
  EXPECT_NE(gpu_fix("NVIDIA driver present but not usable (NVML initialisation failed: GPU access blocked by the "
                    "operating system)", true).find("WDDM"), std::string::npos);
  EXPECT_NE(gpu_fix("no NVIDIA GPU on this machine (libnvidia-ml.so.1 not found)", true).find("driver for Windows"),
            std::string::npos);
  EXPECT_NE(gpu_fix("no NVIDIA GPU on this machine (libnvidia-ml.so.1 not found)", false).find("apt install nvidia-driver"),
            std::string::npos);
  EXPECT_NE(gpu_fix("NVIDIA driver present but not usable (NVML initialisation failed: Driver/library version mismatch)",
                    false).find("reboot"), std::string::npos);
  EXPECT_NE(gpu_fix("NVIDIA driver present but not usable (NVML initialisation failed: Driver Not Loaded)", false)
                .find("modprobe"), std::string::npos);
}

TEST(DoctorFastOpen, OkOnlyWhenTheKernelServesAndAsks) {
  EXPECT_EQ(fast_open_check(3).status, "ok");
  EXPECT_EQ(fast_open_check(0x403).status, "ok");
  Check client_only = fast_open_check(1);  // Linux's default
  EXPECT_EQ(client_only.status, "warn");
  EXPECT_NE(client_only.detail.find("does not serve"), std::string::npos);
  EXPECT_NE(client_only.fix.find("net.ipv4.tcp_fastopen=3"), std::string::npos);
  EXPECT_EQ(fast_open_check(2).status, "warn");
  EXPECT_NE(fast_open_check(2).detail.find("does not ask"), std::string::npos);
  EXPECT_EQ(fast_open_check(0).status, "warn");
  EXPECT_EQ(fast_open_check(std::nullopt).status, "skip");
}

TEST(DoctorPorts, SkipsAPortInUseAndFailsWhenNoneIsFree) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  std::uint16_t held = ntohs(a.sin_port);
  std::uint16_t free_port = 0;
  Check c = check_ports({held, held}, free_port);
  EXPECT_EQ(c.status, "fail");
  EXPECT_EQ(free_port, 0);
  EXPECT_NE(c.fix.find("--port-range"), std::string::npos);
  if (held < 65535) {
    c = check_ports({held, static_cast<std::uint16_t>(held + 1)}, free_port);
    // The next port may be taken by someone else on a busy machine; if it is free, it is the one.
    if (c.status == "ok") {
      EXPECT_EQ(free_port, held + 1);
      EXPECT_NE(c.detail.find("in use: " + std::to_string(held)), std::string::npos) << c.detail;
    }
  }
  ::close(s);
}

}  // namespace
}  // namespace runsnack::cli::doctor
