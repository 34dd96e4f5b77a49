#include "sandbox/child_process.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace runsnack::exec {

namespace asio = boost::asio;

namespace {

// Async-signal-safe decimal formatting for the child.
std::size_t format_pid(char* buf, pid_t pid) {
  char tmp[16];
  std::size_t n = 0;
  unsigned v = static_cast<unsigned>(pid);
  do tmp[n++] = static_cast<char>('0' + v % 10), v /= 10;
  while (v > 0);
  for (std::size_t i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

// In the child, before exec: says on `fd` (the command's stderr) which step failed and why, then
// exits with `code`. Async-signal-safe: no allocation, only write(2).
[[noreturn]] void die(int fd, const char* step, int code = 126) {
  const int err = errno;
  char num[16];
  const std::size_t n = format_pid(num, static_cast<pid_t>(err));
  const char* why = err > 0 && err < 200 ? ::strerrordesc_np(err) : nullptr;
  auto put = [fd](const char* s, std::size_t len) { (void)!::write(fd, s, len); };
  put("runsnack: cannot start the sandbox: ", 36);
  put(step, std::strlen(step));
  put(": ", 2);
  if (why) put(why, std::strlen(why));
  put(" (errno ", 8);
  put(num, n);
  put(")\n", 2);
  _exit(code);
}

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return fail(errc::invalid_argument, "empty command");
  if (options.keep_fds.size() > kMaxKeptFds || options.staged.size() > kMaxKeptFds)
    return fail(errc::invalid_argument, "too many descriptors to pass");
  // The staged mounts' sources and targets, as strings made before the fork (the child must not allocate).
  std::vector<std::string> stage_from, stage_to;
  for (const auto& s : options.staged) {
    stage_from.push_back(s.source);
    stage_to.push_back(options.staging_dir + "/" + s.name);
  }
  std::vector<char*> argv, envp;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : options.envp) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const bool pty = options.pty_slave >= 0;
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!pty) {
    if (::pipe2(out, O_CLOEXEC) != 0) return fail(errc::io_error, "pipe");
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]), ::close(out[1]);
      return fail(errc::io_error, "pipe");
    }
  }
  int devnull = pty ? -1 : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = ::fork();
  if (pid == 0) {
    const int report = pty ? options.pty_slave : err[1];
    // Child: only async-signal-safe calls from here to exec.
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
    if (pty) {
      // A new session whose controlling terminal is the pty: job control works inside.
      setsid();
      if (::ioctl(options.pty_slave, TIOCSCTTY, 0) != 0) die(report, "TIOCSCTTY");
    } else {
      setpgid(0, 0);
    }
    char buf[16];
    std::size_t n = format_pid(buf, getpid());
    for (int fd : options.cgroup_procs_fds)
      if (::write(fd, buf, n) < 0) die(report, "joining the cgroup");
    for (const auto& [resource, value] : options.rlimits) {
      struct rlimit rl{value, value};
      setrlimit(resource, &rl);
    }
    if (options.userns_fd >= 0 && ::setns(options.userns_fd, CLONE_NEWUSER) != 0)
      die(report, "entering the workspace's user namespace");
    if (options.mntns_fd >= 0 && ::setns(options.mntns_fd, CLONE_NEWNS) != 0)
      die(report, "entering the workspace's mount namespace");
    if (!options.staged.empty()) {
      if (::unshare(CLONE_NEWNS) != 0) die(report, "a mount namespace for staging");
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die(report, "making mounts private");
      if (::mount("tmpfs", options.staging_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0711,size=16k") != 0)
        die(report, "the staging tmpfs");
      for (std::size_t i = 0; i < options.staged.size(); ++i) {
        const char* to = stage_to[i].c_str();
        if (options.staged[i].directory) {
          if (::mkdir(to, 0700) != 0) die(report, "a staging folder");
        } else {
          const int f = ::open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
          if (f < 0) die(report, "a staging file");
          ::close(f);
        }
        if (::mount(stage_from[i].c_str(), to, nullptr, MS_BIND, nullptr) != 0) die(report, "staging the workspace");
      }
    }
    if (options.run_as) {
      // Groups first: once the uid is not root, they can no longer be dropped.
      const auto [uid, gid] = *options.run_as;
      if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0)
        die(report, "dropping to the sandbox uid");
      if (::getuid() != uid || ::geteuid() != uid) die(report, "dropping to the sandbox uid");
    }
    if (options.no_new_privs && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(report, "no_new_privs");
    // Out of the way of 3, 4, ... first: a descriptor to pass may sit where another one goes.
    const std::size_t kept = options.keep_fds.size();
    int moved[kMaxKeptFds];
    for (std::size_t i = 0; i < kept; ++i) {
      moved[i] = ::fcntl(options.keep_fds[i], F_DUPFD_CLOEXEC, static_cast<int>(3 + kMaxKeptFds + 8));
      if (moved[i] < 0) die(report, "passing descriptors");
    }
    if (pty) {
      ::dup2(options.pty_slave, 0);
      ::dup2(options.pty_slave, 1);
      ::dup2(options.pty_slave, 2);
    } else {
      ::dup2(devnull, 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
    }
    for (std::size_t i = 0; i < kept; ++i) ::dup2(moved[i], static_cast<int>(3 + i));  // dup2 clears close-on-exec
    ::close_range(static_cast<unsigned>(3 + kept), ~0U, 0);
    ::execve(argv[0], argv.data(), envp.data());
    die(2, argv[0], 127);
  }
  if (!pty) {
    ::close(devnull);
    ::close(out[1]);
    ::close(err[1]);
  }
  if (pid < 0) {
    if (!pty) ::close(out[0]), ::close(err[0]);
    return fail(errc::io_error, std::string("fork: ") + std::strerror(errno));
  }
  ChildProcess c;
  c.pid_ = pid;
  if (!pty) {
    c.out_ = fs::UniqueFd(out[0]);
    c.err_ = fs::UniqueFd(err[0]);
  }
  c.pidfd_ = fs::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(o.pid_), pidfd_(std::move(o.pidfd_)), out_(std::move(o.out_)), err_(std::move(o.err_)), reaped_(o.reaped_) {
  o.pid_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
}

void ChildProcess::kill(int sig) const {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

asio::awaitable<ExitInfo> ChildProcess::wait() {
  ExitInfo info;
  if (pidfd_) {
    int dup = ::dup(pidfd_.get());
    asio::posix::stream_descriptor d(co_await asio::this_coro::executor, dup);
    (void)co_await d.async_wait(asio::posix::stream_descriptor::wait_read, asio::as_tuple(asio::use_awaitable));
  }
  int status = 0;
  struct rusage ru{};
  while (::wait4(pid_, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  if (WIFEXITED(status)) info.status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) info.signal = WTERMSIG(status), info.status = 128 + WTERMSIG(status);
  info.cpu_user_s = double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) / 1e6;
  info.cpu_sys_s = double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) / 1e6;
  info.max_rss_bytes = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
  co_return info;
}

}  // namespace runsnack::exec
