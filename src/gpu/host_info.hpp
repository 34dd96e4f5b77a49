#pragma once
// The provider machine in a few lines, for the info service: host name, OS,
// kernel, CPU and memory. Read from uname, /etc/os-release, /proc/cpuinfo and
// /proc/meminfo; anything unreadable is left empty or 0 rather than failing.
// Thread-safe: reads files, keeps no state.

#include <cstdint>
#include <string>
#include <string_view>

namespace runsnack {

struct HostInfo {
  std::string hostname;
  std::string os;                   // PRETTY_NAME from /etc/os-release, e.g. "Debian GNU/Linux 12 (bookworm)"
  std::string kernel;               // uname: "Linux 6.1.0-18-amd64 x86_64"
  std::string cpu_model;            // e.g. "AMD EPYC 7763 64-Core Processor"
  int cpu_count = 0;                // CPUs this process may run on
  std::uint64_t ram_total = 0;      // bytes
  std::uint64_t ram_available = 0;  // bytes (MemAvailable: what a new job could use)
};

HostInfo query_host();

// The parsers behind query_host(), exposed for tests.
std::string parse_os_release_pretty_name(std::string_view os_release);
std::string parse_cpu_model(std::string_view cpuinfo);
// A "Key:   N kB" line of /proc/meminfo, in bytes; 0 when absent.
std::uint64_t parse_meminfo_bytes(std::string_view meminfo, std::string_view key);

}  // namespace runsnack
