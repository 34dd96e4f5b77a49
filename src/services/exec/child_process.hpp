#pragma once
// A child process started with fork+exec (nothing allocates between the two),
// in its own process group, joined to cgroups and with rlimits applied before
// exec, its stdout/stderr on pipes, reaped through a pidfd so that waiting
// fits an Asio coroutine. The destructor SIGKILLs and reaps a child that is
// still running: no process outlives its owner.

#include "core/error.hpp"
#include "services/fs/safe_fs.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace runsnack::exec {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::vector<std::string> envp;
  std::vector<int> cgroup_procs_fds;
  std::vector<std::pair<int, rlim_t>> rlimits;  // (RLIMIT_*, value)
  int keep_fd = -1;  // passed to the child as descriptor 3 (bwrap --info-fd 3)
  // A pty's slave side: when set, the child starts a new session with it as
  // controlling terminal and stdin/stdout/stderr (the shell), and no pipes are made.
  int pty_slave = -1;
};

struct ExitInfo {
  int status = 0;  // exit code, or 128+signal
  std::optional<int> signal;
  double cpu_user_s = 0, cpu_sys_s = 0;
  std::uint64_t max_rss_bytes = 0;
};

class ChildProcess {
 public:
  // Starts the child with stdin from /dev/null and stdout/stderr on new pipes
  // (or all three on options.pty_slave).
  static Result<ChildProcess> spawn(const SpawnOptions& options);
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  fs::UniqueFd take_stdout() { return std::move(out_); }
  fs::UniqueFd take_stderr() { return std::move(err_); }
  void kill(int sig) const;
  // Waits (asynchronously) until the child exits and reaps it.
  boost::asio::awaitable<ExitInfo> wait();

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  fs::UniqueFd pidfd_, out_, err_;
  bool reaped_ = false;
};

}  // namespace runsnack::exec
