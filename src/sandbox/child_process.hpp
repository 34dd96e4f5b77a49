#pragma once
// A child process started with fork+exec (nothing allocates between the two),
// in its own process group, joined to cgroups and with rlimits applied before
// exec, then (for a sandbox started by a root provider) switched to an
// unprivileged uid with no_new_privs, its stdout/stderr on pipes, reaped
// through a pidfd so that waiting fits an Asio coroutine. The destructor
// SIGKILLs and reaps a child that is still running: no process outlives its
// owner.

#include "core/error.hpp"
#include "fs/safe_fs.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runsnack::exec {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::vector<std::string> envp;
  std::vector<int> cgroup_procs_fds;
  std::vector<std::pair<int, rlim_t>> rlimits;  // (RLIMIT_*, value)
  // Passed to the child as descriptors 3, 4, ... in this order (bwrap's --info-fd, --seccomp, ...);
  // every other descriptor is closed. At most kMaxKeptFds.
  std::vector<int> keep_fds;
  // A pty's slave side: when set, the child starts a new session with it as
  // controlling terminal and stdin/stdout/stderr (the shell), and no pipes are made.
  int pty_slave = -1;
  // stdin on a new pipe whose write end the parent takes (take_stdin) instead of /dev/null.
  bool stdin_pipe = false;
  // After joining the cgroups and setting the rlimits, and before exec: this uid and gid, no
  // supplementary groups (the caller is root). The spawn fails when the switch fails.
  std::optional<std::pair<uid_t, gid_t>> run_as;
  // PR_SET_NO_NEW_PRIVS before exec: nothing the child runs can gain privileges (setuid files, file caps).
  bool no_new_privs = false;
  // Before dropping to run_as (so: as root), what only root can reach made reachable by the program
  // it execs: the child enters a mount namespace of its own, mounts a tmpfs (mode 0711) on
  // `staging_dir` there, and bind-mounts each source on staging_dir/name. A workspace under the
  // provider's 0700 state folder is then at a path the sandbox uid can walk, and nothing changes
  // for anyone else. (By path: a mount may not be bound from the namespace the child left, which
  // a descriptor opened before the fork would name.) At most kMaxKeptFds.
  struct Staged {
    std::string source;
    std::string name;
    bool directory = true;
  };
  std::vector<Staged> staged;
  std::string staging_dir;
  // After joining the cgroups and setting the rlimits: the user namespace, then the mount
  // namespace these descriptors name (a workspace image mounted by fuse2fs in namespaces of its
  // own, fuse2fs_namespace.hpp). The program it execs is no more privileged there: this uid, no
  // capabilities after exec.
  int userns_fd = -1;
  int mntns_fd = -1;
};

inline constexpr std::size_t kMaxKeptFds = 16;

struct ExitInfo {
  int status = 0;  // exit code, or 128+signal
  std::optional<int> signal;
  double cpu_user_s = 0, cpu_sys_s = 0;
  std::uint64_t max_rss_bytes = 0;
};

class SpareChild;

class ChildProcess {
 public:
  // Starts the child with stdin from /dev/null (or a pipe: options.stdin_pipe) and stdout/stderr
  // on new pipes (or all three on options.pty_slave).
  static Result<ChildProcess> spawn(const SpawnOptions& options);
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  fs::UniqueFd take_stdin() { return std::move(in_); }  // with stdin_pipe: its write end
  fs::UniqueFd take_stdout() { return std::move(out_); }
  fs::UniqueFd take_stderr() { return std::move(err_); }
  void kill(int sig) const;
  // Waits (asynchronously) until the child exits and reaps it.
  boost::asio::awaitable<ExitInfo> wait();

 private:
  friend class SpareChild;
  ChildProcess() = default;
  pid_t pid_ = -1;
  fs::UniqueFd pidfd_, in_, out_, err_;
  bool reaped_ = false;
};

// A child forked ahead of its command: it joins its cgroups at once and then waits. Joining a
// cgroup v1 hierarchy costs the kernel an RCU grace period (10-15 ms measured here), which a
// spare pays before the request instead of on its way. Until start() it holds no descriptor of
// its parent's but its control socket, with /dev/null as stdin/stdout/stderr, and it dies with the
// thread that forked it (PR_SET_PDEATHSIG), as bwrap's --die-with-parent does after exec.
class SpareChild {
 public:
  static Result<SpareChild> fork_into(const std::vector<int>& cgroup_procs_fds);
  SpareChild(SpareChild&& o) noexcept;
  SpareChild& operator=(SpareChild&&) = delete;
  ~SpareChild();  // a spare never started is killed and reaped

  pid_t pid() const { return pid_; }
  // Runs the command of `options` in the spare (what spawn() does after joining the cgroups; its
  // cgroup_procs_fds are ignored and a pty is not supported). Fails, leaving nothing running, when
  // the spare is gone or the options do not fit the page it reads them from; either way it is used up.
  Result<ChildProcess> start(const SpawnOptions& options);

 private:
  SpareChild() = default;
  void discard();
  pid_t pid_ = -1;
  fs::UniqueFd pidfd_, control_;
  void* shared_ = nullptr;  // what start() hands over, mapped shared before the fork
};

}  // namespace runsnack::exec
