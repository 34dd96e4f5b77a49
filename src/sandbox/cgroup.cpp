#include "sandbox/cgroup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

namespace runsnack::exec {

namespace sfs = std::filesystem;

namespace {

const sfs::path kRoot = "/sys/fs/cgroup";

// Our own cgroup in a hierarchy ("" for v2's unified line "0::/path").
sfs::path own_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1);
    bool match = controller.empty() ? (line.substr(0, a) == "0" && ctrls.empty())
                                    : ("," + ctrls + ",").find("," + controller + ",") != std::string::npos;
    if (match) return sfs::path(line.substr(b + 1)).relative_path();
  }
  return {};
}

bool write_text(const sfs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

std::vector<pid_t> read_pids(const sfs::path& dir) {
  std::ifstream in(dir / "cgroup.procs");
  std::vector<pid_t> pids;
  long p;
  while (in >> p) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

}  // namespace

Result<Cgroup> Cgroup::create(const std::string& name, std::optional<std::uint64_t> max_procs,
                              std::optional<std::uint64_t> memory_bytes) {
  Cgroup cg;
  std::error_code ec;
  std::ifstream controllers(kRoot / "cgroup.controllers");
  std::string ctrl_list;
  std::getline(controllers, ctrl_list);
  if (controllers && ctrl_list.find("pids") != std::string::npos) {
    cg.v2_ = true;
    sfs::path dir = kRoot / own_path("") / name;
    if (!sfs::create_directory(dir, ec) || ec) return fail(errc::unsupported, "cannot create cgroup " + dir.string());
    cg.dirs_.push_back(dir);
  } else if (sfs::exists(kRoot / "pids" / "cgroup.procs")) {
    sfs::path pids = kRoot / "pids" / own_path("pids") / name;
    if (!sfs::create_directory(pids, ec) || ec) return fail(errc::unsupported, "cannot create cgroup " + pids.string());
    cg.dirs_.push_back(pids);
    sfs::path mem = kRoot / "memory" / own_path("memory") / name;
    if (sfs::exists(kRoot / "memory" / "cgroup.procs") && sfs::create_directory(mem, ec) && !ec) cg.dirs_.push_back(mem);
  } else {
    return fail(errc::unsupported, "no writable cgroup hierarchy");
  }
  if (auto set = cg.set_limits(max_procs, memory_bytes); !set) return set.error();
  for (const auto& d : cg.dirs_) {
    int fd = ::open((d / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return fail(errc::unsupported, "cannot open " + (d / "cgroup.procs").string());
    cg.procs_fds_.push_back(fd);
  }
  return cg;
}

Result<std::string> Cgroup::probe_memory_total() {
  auto cg = create("runsnack-probe-" + std::to_string(::getpid()), std::nullopt, 64ull << 20);
  if (!cg) return cg.error();
  if (!cg->bounds_memory()) return fail(errc::unsupported, std::string(cg->mode()) + " without the memory controller");
  return std::string(cg->mode());
}

// v2: memory.max is there only where the parent enables the memory controller for its children.
bool Cgroup::bounds_memory() const {
  if (v2_) return !dirs_.empty() && sfs::exists(dirs_[0] / "memory.max");
  return dirs_.size() > 1;
}

Result<void> Cgroup::set_limits(std::optional<std::uint64_t> max_procs, std::optional<std::uint64_t> memory_bytes) {
  if (dirs_.empty()) return fail(errc::invalid_argument, "no cgroup");
  if (v2_) {
    if (max_procs) write_text(dirs_[0] / "pids.max", std::to_string(*max_procs));
    if (memory_bytes) write_text(dirs_[0] / "memory.max", std::to_string(*memory_bytes));
    return {};
  }
  if (max_procs && !write_text(dirs_[0] / "pids.max", std::to_string(*max_procs)))
    return fail(errc::unsupported, "cannot set pids.max");
  if (memory_bytes && dirs_.size() > 1) write_text(dirs_[1] / "memory.limit_in_bytes", std::to_string(*memory_bytes));
  return {};
}

void Cgroup::remove_stale(const std::string& prefix, const std::function<bool(const std::string& name)>& stale) {
  std::error_code ec;
  for (const sfs::path& parent : {kRoot / own_path(""), kRoot / "pids" / own_path("pids"), kRoot / "memory" / own_path("memory")}) {
    if (!sfs::exists(parent / "cgroup.procs", ec)) continue;
    for (const auto& entry : sfs::directory_iterator(parent, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && entry.is_directory(ec) && stale(name)) ::rmdir(entry.path().c_str());
    }
  }
}

Cgroup::Cgroup(Cgroup&& o) noexcept : v2_(o.v2_), dirs_(std::move(o.dirs_)), procs_fds_(std::move(o.procs_fds_)) {
  o.dirs_.clear();
  o.procs_fds_.clear();
}

Cgroup::~Cgroup() {
  for (int fd : procs_fds_) ::close(fd);
  if (dirs_.empty()) return;
  kill_all();
  // The kernel needs the killed processes reaped before rmdir succeeds: usually within a
  // millisecond, so short waits first (up to about a second in all).
  for (int wait_us = 250, waited_us = 0; waited_us < 1000000; waited_us += wait_us, wait_us = std::min(wait_us * 2, 20000)) {
    bool all = true;
    for (const auto& d : dirs_) all &= ::rmdir(d.c_str()) == 0 || errno == ENOENT;
    if (all) return;
    std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
  }
}

void Cgroup::kill_all() {
  if (dirs_.empty()) return;
  if (v2_ && write_text(dirs_[0] / "cgroup.kill", "1")) return;
  for (int round = 0; round < 3; ++round)
    for (pid_t p : read_pids(dirs_[0])) ::kill(p, SIGKILL);
}

namespace {

// The value of `key` in a flat keyed file ("oom_kill 2\nmax 0\n"), 0 when absent.
std::uint64_t keyed_count(const std::filesystem::path& file, const std::string& key) {
  std::ifstream in(file);
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return 0;
}

}  // namespace

Cgroup::LimitsHit Cgroup::limits_hit() const {
  LimitsHit hit;
  if (dirs_.empty()) return hit;
  hit.processes = keyed_count(dirs_[0] / "pids.events", "max") > 0;
  hit.memory = v2_ ? keyed_count(dirs_[0] / "memory.events", "oom_kill") > 0
                   : dirs_.size() > 1 && keyed_count(dirs_[1] / "memory.oom_control", "oom_kill") > 0;
  return hit;
}

std::optional<std::uint64_t> Cgroup::peak_memory() const {
  for (const auto& d : dirs_) {
    for (const char* f : {"memory.peak", "memory.max_usage_in_bytes"}) {
      std::ifstream in(d / f);
      std::uint64_t v;
      if (in >> v) return v;
    }
  }
  return std::nullopt;
}

}  // namespace runsnack::exec
