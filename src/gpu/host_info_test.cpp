#include "gpu/host_info.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(HostInfo, SaneOnThisMachine) {
  HostInfo h = query_host();
  EXPECT_FALSE(h.hostname.empty());
  EXPECT_EQ(h.kernel.rfind("Linux ", 0), 0u) << h.kernel;
  EXPECT_FALSE(h.os.empty());
  EXPECT_GE(h.cpu_count, 1);
  EXPECT_GT(h.ram_total, 64ull << 20);
  EXPECT_GT(h.ram_available, 0u);
  EXPECT_LE(h.ram_available, h.ram_total);
}

TEST(HostInfo, ParsesOsRelease) {
  EXPECT_EQ(parse_os_release_pretty_name(
                "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME=Alpine"), "Alpine");
  EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME='Single quoted'\n"), "Single quoted");
  EXPECT_EQ(parse_os_release_pretty_name("NAME=x\n"), "");
  EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME=\""), "\"");  // odd, but no crash
  EXPECT_EQ(parse_os_release_pretty_name(""), "");
}

TEST(HostInfo, ParsesCpuModel) {
  EXPECT_EQ(parse_cpu_model("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core "
                            "Processor\nprocessor\t: 1\nmodel name\t: other\n"),
            "AMD EPYC 7763 64-Core Processor");
  EXPECT_EQ(parse_cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\nHardware\t: BCM2835\n"), "BCM2835");
  EXPECT_EQ(parse_cpu_model("model name\t:\n"), "");
}

TEST(HostInfo, ParsesMeminfo) {
  const char* meminfo = "MemTotal:       131072000 kB\nMemFree:  1 kB\nMemAvailable:   65536000 kB\n";
  EXPECT_EQ(parse_meminfo_bytes(meminfo, "MemTotal"), 131072000ull * 1024);
  EXPECT_EQ(parse_meminfo_bytes(meminfo, "MemAvailable"), 65536000ull * 1024);
  EXPECT_EQ(parse_meminfo_bytes(meminfo, "Mem"), 0u);
  EXPECT_EQ(parse_meminfo_bytes("MemTotal: 99999999999999999999999 kB\n", "MemTotal"), 0u);
}

}  // namespace
}  // namespace runsnack
