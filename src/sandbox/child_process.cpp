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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <new>
#include <utility>

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

// What the child does after joining its cgroups, as plain data: the child must not allocate, and a
// spare reads it from a page shared with its parent (descriptors there are indexes into the ones
// it receives).
struct ChildPlan {
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  std::pair<int, rlim_t> rlimits[8];
  std::size_t n_rlimits = 0;
  int keep_fds[kMaxKeptFds];
  std::size_t n_keep = 0;
  int pty_slave = -1, stdin_r = -1, out_w = -1, err_w = -1, userns_fd = -1, mntns_fd = -1;  // stdin_r: /dev/null or a pipe
  bool run_as = false, no_new_privs = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const char* staging_dir = nullptr;
  const char* stage_from[kMaxKeptFds];
  const char* stage_to[kMaxKeptFds];
  bool stage_directory[kMaxKeptFds];
  std::size_t n_staged = 0;
};

// In the child, signals as a new program expects them, and its process group or session.
void reset_signals_and_group(const ChildPlan& p, int report) {
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
  if (p.pty_slave >= 0) {
    // A new session whose controlling terminal is the pty: job control works inside.
    setsid();
    if (::ioctl(p.pty_slave, TIOCSCTTY, 0) != 0) die(report, "TIOCSCTTY");
  } else {
    setpgid(0, 0);
  }
}

// Returns 0, or the errno of the first failed join.
int join_cgroups(const int* fds, std::size_t n) {
  char buf[16];
  const std::size_t len = format_pid(buf, getpid());
  int failed = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (::write(fds[i], buf, len) < 0 && failed == 0) failed = errno;
  return failed;
}

// In the child, after joining the cgroups: the rest up to exec. Only async-signal-safe calls.
[[noreturn]] void exec_child(const ChildPlan& p) {
  const int report = p.pty_slave >= 0 ? p.pty_slave : p.err_w;
  for (std::size_t i = 0; i < p.n_rlimits; ++i) {
    struct rlimit rl{p.rlimits[i].second, p.rlimits[i].second};
    setrlimit(p.rlimits[i].first, &rl);
  }
  if (p.userns_fd >= 0 && ::setns(p.userns_fd, CLONE_NEWUSER) != 0) die(report, "entering the workspace's user namespace");
  if (p.mntns_fd >= 0 && ::setns(p.mntns_fd, CLONE_NEWNS) != 0) die(report, "entering the workspace's mount namespace");
  if (p.n_staged > 0) {
    if (::unshare(CLONE_NEWNS) != 0) die(report, "a mount namespace for staging");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die(report, "making mounts private");
    if (::mount("tmpfs", p.staging_dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0711,size=16k") != 0)
      die(report, "the staging tmpfs");
    for (std::size_t i = 0; i < p.n_staged; ++i) {
      const char* to = p.stage_to[i];
      if (p.stage_directory[i]) {
        if (::mkdir(to, 0700) != 0) die(report, "a staging folder");
      } else {
        const int f = ::open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (f < 0) die(report, "a staging file");
        ::close(f);
      }
      if (::mount(p.stage_from[i], to, nullptr, MS_BIND, nullptr) != 0) die(report, "staging the workspace");
    }
  }
  if (p.run_as) {
    // Groups first: once the uid is not root, they can no longer be dropped.
    if (::setgroups(0, nullptr) != 0 || ::setresgid(p.gid, p.gid, p.gid) != 0 || ::setresuid(p.uid, p.uid, p.uid) != 0)
      die(report, "dropping to the sandbox uid");
    if (::getuid() != p.uid || ::geteuid() != p.uid) die(report, "dropping to the sandbox uid");
  }
  if (p.no_new_privs && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(report, "no_new_privs");
  // Out of the way of 3, 4, ... first: a descriptor to pass may sit where another one goes.
  int moved[kMaxKeptFds];
  for (std::size_t i = 0; i < p.n_keep; ++i) {
    moved[i] = ::fcntl(p.keep_fds[i], F_DUPFD_CLOEXEC, static_cast<int>(3 + kMaxKeptFds + 8));
    if (moved[i] < 0) die(report, "passing descriptors");
  }
  if (p.pty_slave >= 0) {
    ::dup2(p.pty_slave, 0);
    ::dup2(p.pty_slave, 1);
    ::dup2(p.pty_slave, 2);
  } else {
    ::dup2(p.stdin_r, 0);
    ::dup2(p.out_w, 1);
    ::dup2(p.err_w, 2);
  }
  for (std::size_t i = 0; i < p.n_keep; ++i) ::dup2(moved[i], static_cast<int>(3 + i));  // dup2 clears close-on-exec
  ::close_range(static_cast<unsigned>(3 + p.n_keep), ~0U, 0);
  ::execve(p.argv[0], p.argv, p.envp);
  die(2, p.argv[0], 127);
}

Result<void> check_sizes(const SpawnOptions& options) {
  if (options.argv.empty()) return fail(errc::invalid_argument, "empty command");
  if (options.keep_fds.size() > kMaxKeptFds || options.staged.size() > kMaxKeptFds)
    return fail(errc::invalid_argument, "too many descriptors to pass");
  if (options.rlimits.size() > std::size(ChildPlan{}.rlimits)) return fail(errc::invalid_argument, "too many rlimits");
  return {};
}

// The plan's fields that need no strings (those differ: the parent's vectors, or the shared page).
void fill_plan(ChildPlan& p, const SpawnOptions& options) {
  for (const auto& r : options.rlimits) p.rlimits[p.n_rlimits++] = r;
  for (int fd : options.keep_fds) p.keep_fds[p.n_keep++] = fd;
  p.pty_slave = options.pty_slave;
  p.userns_fd = options.userns_fd;
  p.mntns_fd = options.mntns_fd;
  if (options.run_as) p.run_as = true, p.uid = options.run_as->first, p.gid = options.run_as->second;
  p.no_new_privs = options.no_new_privs;
  p.n_staged = options.staged.size();
  for (std::size_t i = 0; i < p.n_staged; ++i) p.stage_directory[i] = options.staged[i].directory;
}

struct Pipes {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  int stdin_r = -1;  // the child's stdin: /dev/null, or a pipe's read end
  int stdin_w = -1;  // that pipe's write end, the parent's
  Result<void> open(bool stdin_pipe) {
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return fail(errc::io_error, "pipe");
    if (stdin_pipe) {
      int in[2];
      if (::pipe2(in, O_CLOEXEC) != 0) return fail(errc::io_error, "pipe");
      stdin_r = in[0], stdin_w = in[1];
      return {};
    }
    stdin_r = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (stdin_r < 0) return fail(errc::io_error, "cannot open /dev/null");
    return {};
  }
  void close_child_ends() {
    for (int* fd : {&out[1], &err[1], &stdin_r})
      if (*fd >= 0) ::close(*fd), *fd = -1;
  }
  ~Pipes() {
    close_child_ends();
    for (int* fd : {&out[0], &err[0], &stdin_w})
      if (*fd >= 0) ::close(*fd);
  }
};

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const SpawnOptions& options) {
  if (auto ok = check_sizes(options); !ok) return ok.error();
  // The strings and pointer arrays are made before the fork (the child must not allocate).
  std::vector<std::string> stage_to;
  for (const auto& s : options.staged) stage_to.push_back(options.staging_dir + "/" + s.name);
  std::vector<char*> argv, envp;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : options.envp) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ChildPlan plan;
  fill_plan(plan, options);
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.staging_dir = options.staging_dir.c_str();
  for (std::size_t i = 0; i < options.staged.size(); ++i) {
    plan.stage_from[i] = options.staged[i].source.c_str();
    plan.stage_to[i] = stage_to[i].c_str();
  }
  const bool pty = options.pty_slave >= 0;
  Pipes pipes;
  if (!pty) {
    if (auto opened = pipes.open(options.stdin_pipe); !opened) return opened.error();
    plan.stdin_r = pipes.stdin_r, plan.out_w = pipes.out[1], plan.err_w = pipes.err[1];
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to exec.
    const int report = pty ? options.pty_slave : pipes.err[1];
    reset_signals_and_group(plan, report);
    if (int e = join_cgroups(options.cgroup_procs_fds.data(), options.cgroup_procs_fds.size()); e != 0) {
      errno = e;
      die(report, "joining the cgroup");
    }
    exec_child(plan);
  }
  pipes.close_child_ends();
  if (pid < 0) return fail(errc::io_error, std::string("fork: ") + std::strerror(errno));
  ChildProcess c;
  c.pid_ = pid;
  if (!pty) {
    c.out_ = fs::UniqueFd(std::exchange(pipes.out[0], -1));
    c.err_ = fs::UniqueFd(std::exchange(pipes.err[0], -1));
    c.in_ = fs::UniqueFd(std::exchange(pipes.stdin_w, -1));
  }
  c.pidfd_ = fs::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(o.pid_), pidfd_(std::move(o.pidfd_)), in_(std::move(o.in_)), out_(std::move(o.out_)), err_(std::move(o.err_)),
      reaped_(o.reaped_) {
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

namespace {

constexpr std::size_t kSharedBytes = 1 << 20;                 // a command's plan, argv, environment and paths
constexpr std::size_t kMaxPassedFds = 3 + kMaxKeptFds + 2;  // stdin, stdout, stderr, kept, two namespaces

// Places a command's plan on the spare's shared page (same address in both processes).
class SharedWriter {
 public:
  SharedWriter(void* base, std::size_t size) : at_(static_cast<char*>(base)), end_(at_ + size) {}
  template <class T>
  T* alloc(std::size_t n) {
    const auto start = (reinterpret_cast<std::uintptr_t>(at_) + alignof(T) - 1) & ~(std::uintptr_t{alignof(T)} - 1);
    const auto bytes = n * sizeof(T);
    if (start + bytes > reinterpret_cast<std::uintptr_t>(end_)) {
      full_ = true;
      return nullptr;
    }
    at_ = reinterpret_cast<char*>(start + bytes);
    return reinterpret_cast<T*>(start);
  }
  char* copy(const std::string& text) {
    char* out = alloc<char>(text.size() + 1);
    if (out) std::memcpy(out, text.c_str(), text.size() + 1);
    return out;
  }
  char** copy_all(const std::vector<std::string>& texts) {
    char** out = alloc<char*>(texts.size() + 1);
    if (!out) return nullptr;
    for (std::size_t i = 0; i < texts.size(); ++i) out[i] = copy(texts[i]);
    out[texts.size()] = nullptr;
    return out;
  }
  bool full() const { return full_; }

 private:
  char* at_;
  char* end_;
  bool full_ = false;
};

// The spare, from its fork to exec (only async-signal-safe calls): join the cgroups, drop every
// descriptor but the control socket, wait for the plan and its descriptors, then go on as spawn()'s child.
[[noreturn]] void spare_main(int control, int devnull, const int* cgroup_fds, std::size_t n_cgroup_fds,
                             const void* shared, pid_t parent) {
  reset_signals_and_group(ChildPlan{}, devnull);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(0);
  const int joined = join_cgroups(cgroup_fds, n_cgroup_fds);
  // Above 0-3 first: a parent started with closed stdio may have been given them.
  const int kept_control = ::fcntl(control, F_DUPFD, 10), kept_null = ::fcntl(devnull, F_DUPFD, 10);
  if (kept_control < 0 || kept_null < 0) _exit(0);
  for (int fd = 0; fd < 3; ++fd) ::dup2(kept_null, fd);
  if (::dup2(kept_control, 3) != 3) _exit(0);
  ::close_range(4, ~0U, 0);
  char byte = 0;
  alignas(struct cmsghdr) char space[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  struct iovec iov{&byte, 1};
  struct msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = space;
  msg.msg_controllen = sizeof(space);
  ssize_t got;
  do got = ::recvmsg(3, &msg, MSG_CMSG_CLOEXEC);
  while (got < 0 && errno == EINTR);
  if (got <= 0) _exit(0);  // dropped unused, or the parent is gone
  int fds[kMaxPassedFds];
  std::size_t n = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count && n < kMaxPassedFds; ++i) std::memcpy(&fds[n++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  ChildPlan plan;
  std::memcpy(static_cast<void*>(&plan), shared, sizeof(plan));
  auto fd_at = [&](int index) { return index >= 0 && static_cast<std::size_t>(index) < n ? fds[index] : -1; };
  plan.stdin_r = fd_at(plan.stdin_r);
  plan.out_w = fd_at(plan.out_w);
  plan.err_w = fd_at(plan.err_w);
  plan.userns_fd = fd_at(plan.userns_fd);
  plan.mntns_fd = fd_at(plan.mntns_fd);
  for (std::size_t i = 0; i < plan.n_keep; ++i) plan.keep_fds[i] = fd_at(plan.keep_fds[i]);
  if (plan.err_w < 0 || plan.out_w < 0 || plan.stdin_r < 0) _exit(126);
  if ((msg.msg_flags & MSG_CTRUNC) != 0) die(plan.err_w, "receiving the command's descriptors");
  if (joined != 0) {
    errno = joined;
    die(plan.err_w, "joining the cgroup");
  }
  exec_child(plan);
}

}  // namespace

Result<SpareChild> SpareChild::fork_into(const std::vector<int>& cgroup_procs_fds) {
  SpareChild spare;
  void* shared = ::mmap(nullptr, kSharedBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (shared == MAP_FAILED) return fail(errc::io_error, std::string("mmap: ") + std::strerror(errno));
  spare.shared_ = shared;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return fail(errc::io_error, std::string("socketpair: ") + std::strerror(errno));
  spare.control_ = fs::UniqueFd(pair[0]);
  const fs::UniqueFd theirs(pair[1]);
  const fs::UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) return fail(errc::io_error, "cannot open /dev/null");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) spare_main(theirs.get(), devnull.get(), cgroup_procs_fds.data(), cgroup_procs_fds.size(), shared, parent);
  if (pid < 0) return fail(errc::io_error, std::string("fork: ") + std::strerror(errno));
  spare.pid_ = pid;
  spare.pidfd_ = fs::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  return spare;
}

SpareChild::SpareChild(SpareChild&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), pidfd_(std::move(o.pidfd_)), control_(std::move(o.control_)),
      shared_(std::exchange(o.shared_, nullptr)) {}

SpareChild::~SpareChild() {
  discard();
  if (shared_) ::munmap(shared_, kSharedBytes);
}

void SpareChild::discard() {
  control_ = fs::UniqueFd();  // a spare still waiting reads the end and exits
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

Result<ChildProcess> SpareChild::start(const SpawnOptions& options) {
  struct UsedUp {
    SpareChild& spare;
    ~UsedUp() { spare.discard(); }  // after a success there is nothing left to discard
  } used_up{*this};
  if (pid_ <= 0 || !control_) return fail(errc::closed, "the spare process is gone");
  if (auto ok = check_sizes(options); !ok) return ok.error();
  if (options.pty_slave >= 0) return fail(errc::unsupported, "a spare process does not start a terminal");
  SharedWriter page(shared_, kSharedBytes);
  ChildPlan* plan = new (page.alloc<ChildPlan>(1)) ChildPlan{};
  fill_plan(*plan, options);
  plan->argv = page.copy_all(options.argv);
  plan->envp = page.copy_all(options.envp);
  plan->staging_dir = page.copy(options.staging_dir);
  for (std::size_t i = 0; i < options.staged.size(); ++i) {
    plan->stage_from[i] = page.copy(options.staged[i].source);
    plan->stage_to[i] = page.copy(options.staging_dir + "/" + options.staged[i].name);
  }
  if (page.full()) return fail(errc::too_large, "the command does not fit a spare process's page");
  Pipes pipes;
  if (auto opened = pipes.open(options.stdin_pipe); !opened) return opened.error();
  // Descriptors travel with the message; the plan names them by their place in it.
  std::vector<int> passed = {pipes.stdin_r, pipes.out[1], pipes.err[1]};
  plan->stdin_r = 0, plan->out_w = 1, plan->err_w = 2;
  auto pass = [&](int fd) { passed.push_back(fd); return static_cast<int>(passed.size() - 1); };
  for (std::size_t i = 0; i < plan->n_keep; ++i) plan->keep_fds[i] = pass(options.keep_fds[i]);
  if (options.userns_fd >= 0) plan->userns_fd = pass(options.userns_fd);
  if (options.mntns_fd >= 0) plan->mntns_fd = pass(options.mntns_fd);
  char byte = 1;
  alignas(struct cmsghdr) char space[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  struct iovec iov{&byte, 1};
  struct msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = space;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * passed.size());
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * passed.size());
  std::memcpy(CMSG_DATA(c), passed.data(), sizeof(int) * passed.size());
  if (::sendmsg(control_.get(), &msg, MSG_NOSIGNAL) != 1)
    return fail(errc::closed, std::string("the spare process is gone: ") + std::strerror(errno));
  pipes.close_child_ends();
  ChildProcess child;
  child.pid_ = std::exchange(pid_, -1);
  child.pidfd_ = std::move(pidfd_);
  child.out_ = fs::UniqueFd(std::exchange(pipes.out[0], -1));
  child.err_ = fs::UniqueFd(std::exchange(pipes.err[0], -1));
  child.in_ = fs::UniqueFd(std::exchange(pipes.stdin_w, -1));
  return child;
}

}  // namespace runsnack::exec
