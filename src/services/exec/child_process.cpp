#include "services/exec/child_process.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
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

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return fail(errc::invalid_argument, "empty command");
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
    // Child: only async-signal-safe calls from here to exec.
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
    if (pty) {
      // A new session whose controlling terminal is the pty: job control works inside.
      setsid();
      if (::ioctl(options.pty_slave, TIOCSCTTY, 0) != 0) _exit(126);
    } else {
      setpgid(0, 0);
    }
    char buf[16];
    std::size_t n = format_pid(buf, getpid());
    for (int fd : options.cgroup_procs_fds)
      if (::write(fd, buf, n) < 0) _exit(126);
    for (const auto& [resource, value] : options.rlimits) {
      struct rlimit rl{value, value};
      setrlimit(resource, &rl);
    }
    int keep = options.keep_fd >= 0 ? ::fcntl(options.keep_fd, F_DUPFD_CLOEXEC, 10) : -1;
    if (pty) {
      ::dup2(options.pty_slave, 0);
      ::dup2(options.pty_slave, 1);
      ::dup2(options.pty_slave, 2);
    } else {
      ::dup2(devnull, 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
    }
    if (keep >= 0) ::dup2(keep, 3);  // dup2 clears close-on-exec
    ::close_range(keep >= 0 ? 4 : 3, ~0U, 0);
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
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
