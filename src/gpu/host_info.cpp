#include "gpu/host_info.hpp"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>
#include <climits>
#include <optional>

#include "core/paths.hpp"

namespace runsnack {
namespace {

// These files are a few kilobytes; the bound only guards against oddities.
constexpr std::size_t kProcFileMaxBytes = 4 * 1024 * 1024;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Calls f(line) for each line until it returns true.
template <class F>
void for_each_line(std::string_view text, F f) {
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (f(line)) return;
    if (end == std::string_view::npos) return;
    text.remove_prefix(end + 1);
  }
}

// The value of "key<sep>value" when `line` starts with `key` (spaces allowed before sep).
std::optional<std::string_view> value_of(std::string_view line, std::string_view key, char sep) {
  if (line.substr(0, key.size()) != key) return std::nullopt;
  std::string_view rest = trim(line.substr(key.size()));
  if (rest.empty() || rest.front() != sep) return std::nullopt;
  return trim(rest.substr(1));
}

std::string read_text(const char* path) {
  auto text = read_file(path, kProcFileMaxBytes);
  return text ? std::move(*text) : std::string();
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  // The affinity mask, not the machine's total: a container or taskset limits it.
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n <= INT_MAX ? static_cast<int>(n) : 0;
}

}  // namespace

std::string parse_os_release_pretty_name(std::string_view os_release) {
  std::string out;
  for_each_line(os_release, [&](std::string_view line) {
    auto v = value_of(line, "PRETTY_NAME", '=');
    if (!v) return false;
    std::string_view value = *v;
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    out = value;
    return true;
  });
  return out;
}

std::string parse_cpu_model(std::string_view cpuinfo) {
  std::string out;
  // x86 has "model name"; some ARM kernels only "Hardware" or "Processor".
  for (std::string_view key : {"model name", "Hardware", "Processor", "cpu model"}) {
    for_each_line(cpuinfo, [&](std::string_view line) {
      auto v = value_of(line, key, ':');
      if (!v || v->empty()) return false;
      out = *v;
      return true;
    });
    if (!out.empty()) break;
  }
  return out;
}

std::uint64_t parse_meminfo_bytes(std::string_view meminfo, std::string_view key) {
  std::uint64_t bytes = 0;
  for_each_line(meminfo, [&](std::string_view line) {
    auto v = value_of(line, key, ':');
    if (!v) return false;
    std::uint64_t kib = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), kib);
    (void)end;
    if (ec == std::errc() && kib <= UINT64_MAX / 1024) bytes = kib * 1024;
    return true;
  });
  return bytes;
}

HostInfo query_host() {
  HostInfo host;
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) == 0) host.hostname = name;
  struct utsname uts {};
  if (::uname(&uts) == 0) host.kernel = std::string(uts.sysname) + " " + uts.release + " " + uts.machine;
  host.os = parse_os_release_pretty_name(read_text("/etc/os-release"));
  if (host.os.empty()) host.os = parse_os_release_pretty_name(read_text("/usr/lib/os-release"));
  host.cpu_model = parse_cpu_model(read_text("/proc/cpuinfo"));
  host.cpu_count = usable_cpus();
  std::string meminfo = read_text("/proc/meminfo");
  host.ram_total = parse_meminfo_bytes(meminfo, "MemTotal");
  host.ram_available = parse_meminfo_bytes(meminfo, "MemAvailable");
  return host;
}

}  // namespace runsnack
