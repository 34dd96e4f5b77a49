#pragma once
// One cgroup per sandboxed command, for limits that rlimits cannot give a
// root-run provider (RLIMIT_NPROC does not bind root) and for peak memory
// and a sure kill. cgroup v2 (a unified hierarchy with the pids/memory
// controllers) is used when present, else v1 (pids and memory hierarchies).
// Where neither is writable, create() fails and the caller falls back to
// rlimits: mode() says which is in force.
//
// The child joins by writing its pid to procs_fd() between fork and exec
// (the descriptor is opened before the fork: nothing allocates in the child).

#include "core/error.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::exec {

class Cgroup {
 public:
  static Result<Cgroup> create(const std::string& name, std::optional<std::uint64_t> max_procs,
                               std::optional<std::uint64_t> memory_bytes);
  Cgroup(Cgroup&&) noexcept;
  Cgroup& operator=(Cgroup&&) = delete;
  Cgroup(const Cgroup&) = delete;
  ~Cgroup();  // kills what is left, removes the groups

  // Whether a command's memory limit is held here as the total of all its processes: a trial
  // group is made with a memory limit, as prepare_limits (launch.hpp) makes one for a command, and
  // removed at once. The mode ("cgroup v2", "cgroup v1") when it is; else why not: each process
  // then gets an RLIMIT_AS of its own, and a CUDA server none (launch.hpp).
  static Result<std::string> probe_memory_total();
  // Removes the empty groups beside ours whose name starts with `prefix` and that `stale` names
  // (what a provider killed with SIGKILL leaves behind); rmdir spares any group with a process in it.
  static void remove_stale(const std::string& prefix, const std::function<bool(const std::string& name)>& stale);
  // Limits set (or changed) after creation: a spare's group gets its command's when taken.
  Result<void> set_limits(std::optional<std::uint64_t> max_procs, std::optional<std::uint64_t> memory_bytes);
  // Descriptors of cgroup.procs, one per hierarchy (v1 has two).
  const std::vector<int>& procs_fds() const { return procs_fds_; }
  void kill_all();
  std::optional<std::uint64_t> peak_memory() const;
  // Which of its limits stopped something: the kernel killed one of its
  // processes at the memory limit (v2 memory.events, v1 memory.oom_control:
  // oom_kill), a fork failed at the process limit (pids.events: max). So a
  // command that ends with SIGKILL or a failed fork is told why.
  struct LimitsHit {
    bool memory = false;
    bool processes = false;
  };
  LimitsHit limits_hit() const;
  const char* mode() const { return v2_ ? "cgroup v2" : "cgroup v1"; }
  // Where its memory (and on v2 its CPU time) is counted: the unified group, or v1's memory group.
  std::filesystem::path usage_dir() const { return dirs_.empty() ? std::filesystem::path() : dirs_.back(); }

 private:
  Cgroup() = default;
  bool bounds_memory() const;
  bool v2_ = false;
  std::vector<std::filesystem::path> dirs_;  // [pids-or-unified, memory (v1)]
  std::vector<int> procs_fds_;
};

}  // namespace runsnack::exec
