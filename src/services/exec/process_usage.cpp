#include "services/exec/process_usage.hpp"

#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace runsnack::exec {

namespace {

namespace sfs = std::filesystem;

std::optional<std::uint64_t> read_number(const sfs::path& file) {
  std::ifstream in(file);
  std::uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

// cpu.stat's "usage_usec N" line (cgroup v2).
std::optional<double> cgroup_cpu_seconds(const sfs::path& dir) {
  std::ifstream in(dir / "cpu.stat");
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value)
    if (key == "usage_usec") return static_cast<double>(value) / 1e6;
  return std::nullopt;
}

std::optional<std::uint64_t> cgroup_memory_bytes(const sfs::path& dir) {
  if (auto v = read_number(dir / "memory.current")) return v;  // v2
  return read_number(dir / "memory.usage_in_bytes");           // v1
}

}  // namespace

std::vector<ProcessInfo> read_processes(const sfs::path& proc) {
  static const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<ProcessInfo> out;
  std::error_code ec;
  for (const auto& e : sfs::directory_iterator(proc, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos) continue;
    // stat: "pid (comm) state ppid ... utime(14) stime(15) cutime(16) cstime(17)"; comm may hold ") ".
    std::ifstream in(e.path() / "stat");
    std::string text;
    if (!std::getline(in, text)) continue;
    const auto close = text.rfind(')');
    if (close == std::string::npos || close + 2 > text.size()) continue;
    std::istringstream rest(text.substr(close + 2));
    std::string state;
    long long ppid = 0, skip = 0, ut = 0, st = 0, cut = 0, cst = 0;
    rest >> state >> ppid;
    for (int i = 0; i < 9; ++i) rest >> skip;  // fields 5..13
    rest >> ut >> st >> cut >> cst;
    if (!rest) continue;
    ProcessInfo p;
    p.pid = static_cast<pid_t>(std::stol(name));
    p.ppid = static_cast<pid_t>(ppid);
    p.cpu_seconds = static_cast<double>(ut + st + cut + cst) / tick;
    std::ifstream statm(e.path() / "statm");
    std::uint64_t size = 0, resident = 0;
    if (statm >> size >> resident) p.rss_bytes = resident * page;
    out.push_back(p);
  }
  return out;
}

std::vector<ProcessInfo> process_tree(const std::vector<ProcessInfo>& all, pid_t root) {
  std::multimap<pid_t, const ProcessInfo*> children;
  const ProcessInfo* top = nullptr;
  for (const auto& p : all) {
    if (p.pid == root) top = &p;
    else children.emplace(p.ppid, &p);
  }
  std::vector<ProcessInfo> out;
  if (!top) return out;
  // Breadth first from the root; each process is reached once (its one parent), so a
  // stand-in /proc with a cycle cannot make this loop.
  out.push_back(*top);
  for (std::size_t i = 0; i < out.size() && out.size() <= all.size(); ++i) {
    auto [begin, end] = children.equal_range(out[i].pid);
    for (auto it = begin; it != end; ++it)
      if (it->second->pid != root) out.push_back(*it->second);
  }
  return out;
}

CommandUsage command_usage(const std::vector<ProcessInfo>& all, pid_t root, const sfs::path& cgroup) {
  CommandUsage usage;
  const auto tree = process_tree(all, root);
  for (const auto& p : tree) usage.pids.push_back(p.pid);
  if (!cgroup.empty()) {
    usage.cpu_seconds = cgroup_cpu_seconds(cgroup);
    usage.memory_bytes = cgroup_memory_bytes(cgroup);
  }
  if (tree.empty()) return usage;
  if (!usage.cpu_seconds) {
    double cpu = 0;
    for (const auto& p : tree) cpu += p.cpu_seconds;
    usage.cpu_seconds = cpu;
  }
  if (!usage.memory_bytes) {
    std::uint64_t rss = 0;
    for (const auto& p : tree) rss += p.rss_bytes;
    usage.memory_bytes = rss;
  }
  return usage;
}

}  // namespace runsnack::exec
