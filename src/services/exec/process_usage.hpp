#pragma once
// What a running command uses now, measured from outside: `runsnack
// sessions` for each command of a live session, and the usage budget's watch
// (usage_budget.hpp). From the command's cgroup where it has one and its files
// can be read (cgroup v2 cpu.stat usage_usec, memory.current; v1
// memory.usage_in_bytes), else summed over its process tree in /proc
// (utime+stime with the reaped children's, resident set size).
//
// Whatever cannot be read (a process of another uid behind hidepid, an
// ended command) is left out or unknown (nullopt): never an error.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace runsnack::exec {

struct ProcessInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  double cpu_seconds = 0;       // user + system, its reaped children's included
  std::uint64_t rss_bytes = 0;  // resident set (0 when statm cannot be read)
};

// Every process in `proc` (/proc, or a test's stand-in) whose stat can be read.
std::vector<ProcessInfo> read_processes(const std::filesystem::path& proc = "/proc");
// `root` and all its descendants among `all` (empty when `root` is not there).
std::vector<ProcessInfo> process_tree(const std::vector<ProcessInfo>& all, pid_t root);

struct CommandUsage {
  std::optional<double> cpu_seconds;
  std::optional<std::uint64_t> memory_bytes;
  std::vector<pid_t> pids;  // its processes (for per-process GPU memory)
};

// The command whose sandbox's outermost process is `root`, with cgroup folder `cgroup` (empty: none).
CommandUsage command_usage(const std::vector<ProcessInfo>& all, pid_t root, const std::filesystem::path& cgroup);

}  // namespace runsnack::exec
