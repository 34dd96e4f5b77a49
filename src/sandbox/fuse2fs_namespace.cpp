#include "sandbox/fuse2fs_namespace.hpp"

#include "sandbox/workspace_image.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace runsnack::exec {

namespace sfs = std::filesystem;

namespace {

constexpr auto kMountWait = std::chrono::seconds(20);  // a loaded machine; fuse2fs itself takes ~0.1 s
constexpr auto kEndWait = std::chrono::seconds(10);    // fuse2fs writes the filesystem out before it exits

sfs::path record_of(const sfs::path& image) {
  sfs::path p = image;
  p += ".fuse2fs";
  return p;
}

// State and start time from /proc/<pid>/stat; nullopt when there is no such process.
std::optional<std::pair<char, std::uint64_t>> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string f;
  char state = '?';
  std::uint64_t start = 0;
  for (int i = 3; fields >> f; ++i) {  // field 3 is the state, 22 the start time
    if (i == 3) state = f.empty() ? '?' : f[0];
    if (i == 22) {
      start = std::strtoull(f.c_str(), nullptr, 10);
      return std::pair{state, start};
    }
  }
  return std::nullopt;
}

std::vector<std::string> cmdline_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> out;
  for (std::string a; std::getline(in, a, '\0');) out.push_back(a);
  return out;
}

// In the forked child: says why it failed on `fd` and exits. Async-signal-safe.
[[noreturn]] void child_fail(int fd, const char* step) {
  const char* why = ::strerrordesc_np(errno);
  (void)!::write(fd, step, std::strlen(step));
  (void)!::write(fd, ": ", 2);
  if (why) (void)!::write(fd, why, std::strlen(why));
  (void)!::write(fd, "\n", 1);
  _exit(127);
}

bool write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// Keeps CAP_SYS_ADMIN across exec for a process that is not root in its user namespace: the
// capability must be inheritable before it may be ambient. Async-signal-safe (raw syscalls).
bool keep_sys_admin_across_exec() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_TO_INDEX(CAP_SYS_ADMIN)].inheritable |= CAP_TO_MASK(CAP_SYS_ADMIN);
  if (::syscall(SYS_capset, &header, data) != 0) return false;
  return ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) == 0;
}

std::string read_log(int fd) {
  char buf[4096];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

bool user_namespaces_usable(std::string* why) {
  static std::once_flag once;
  static int refused = 0;  // the child's errno, 0 when it could
  std::call_once(once, [] {
    const pid_t pid = ::fork();
    if (pid == 0) _exit(::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : (errno & 0xff) ? errno & 0xff : 1);
    int status = 0;
    if (pid < 0) {
      refused = errno;
      return;
    }
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    refused = WIFEXITED(status) ? WEXITSTATUS(status) : EPERM;
  });
  if (refused != 0 && why)
    *why = std::string("user namespaces are closed to this user (") + std::strerror(refused) +
           "; kernel.unprivileged_userns_clone or user.max_user_namespaces, or the service's RestrictNamespaces)";
  return refused == 0;
}

sfs::path seen_through(pid_t holder, const sfs::path& path) {
  if (holder <= 0) return path;
  return sfs::path("/proc") / std::to_string(holder) / "root" / path.relative_path();
}

Result<NamespaceMount> mount_in_namespace(const sfs::path& image, const sfs::path& dir) {
  auto exe = find_tool("fuse2fs");
  if (!exe) return fail(errc::unsupported, "fuse2fs is not installed (apt install fuse2fs)");
  // Everything the child needs, made before the fork (it must not allocate).
  const std::string uid_map = std::to_string(::getuid()) + " " + std::to_string(::getuid()) + " 1\n";
  const std::string gid_map = std::to_string(::getgid()) + " " + std::to_string(::getgid()) + " 1\n";
  // -f: it stays our child (no daemon); nonempty: as fusermount3 allows.
  std::vector<std::string> args = {"fuse2fs", image.string(), dir.string(), "-o", "rw,nonempty", "-f"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  // Its output: kept for the error, in a memfd that nothing fills up.
  const int log = ::memfd_create("runsnack-fuse2fs", MFD_CLOEXEC);
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log < 0 || devnull < 0) {
    if (log >= 0) ::close(log);
    if (devnull >= 0) ::close(devnull);
    return fail(errc::io_error, std::string("cannot start fuse2fs: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to exec.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);  // libfuse sets its handlers only over the defaults
    ::setsid();  // a Ctrl-C at the provider's terminal is the provider's to handle, not fuse2fs's
    // A provider killed outright takes the mount with it (the starting thread lives as long as the process).
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent) _exit(1);
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) child_fail(log, "unshare(user, mount namespaces)");
    if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/uid_map", uid_map) ||
        !write_file("/proc/self/gid_map", gid_map))
      child_fail(log, "mapping this user into its namespace");
    if (!keep_sys_admin_across_exec()) child_fail(log, "keeping CAP_SYS_ADMIN (in the namespace) for fuse2fs");
    ::dup2(devnull, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::close_range(3, ~0U, 0);
    ::execve(exe->c_str(), argv.data(), envp);
    child_fail(2, "exec fuse2fs");
  }
  ::close(devnull);
  if (pid < 0) {
    ::close(log);
    return fail(errc::io_error, std::string("fork: ") + std::strerror(errno));
  }
  NamespaceMount m{pid, 0, true};
  if (auto st = proc_stat(pid)) m.start_time = st->second;
  const sfs::path view = seen_through(pid, dir);
  const auto deadline = std::chrono::steady_clock::now() + kMountWait;
  auto wait_ms = std::chrono::milliseconds(5);
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      std::string said = read_log(log);
      ::close(log);
      return fail(errc::io_error, "fuse2fs (in a user namespace of its own) could not mount " + image.string() +
                                      (said.empty() ? std::string() : ": " + said));
    }
    if (is_mount_point(view)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string said = read_log(log);
      ::close(log);
      end_namespace_mount(m, image);
      return fail(errc::io_error,
                  "fuse2fs did not mount " + image.string() + " in 20 s" + (said.empty() ? "" : ": " + said));
    }
    std::this_thread::sleep_for(wait_ms);
    wait_ms = std::min(wait_ms * 2, std::chrono::milliseconds(100));
  }
  ::close(log);
  std::ofstream(record_of(image), std::ios::trunc) << m.pid << " " << m.start_time << "\n";
  return m;
}

std::optional<NamespaceMount> left_namespace_mount(const sfs::path& image) {
  std::ifstream in(record_of(image));
  NamespaceMount m;
  if (!(in >> m.pid >> m.start_time) || m.pid <= 0) return std::nullopt;
  if (!still_running(m)) return std::nullopt;
  // Only that image's fuse2fs: a record is no reason to signal anything else.
  const auto args = cmdline_of(m.pid);
  if (args.size() < 2 || sfs::path(args[0]).filename() != "fuse2fs" || args[1] != image.string()) return std::nullopt;
  return m;
}

bool still_running(NamespaceMount& m) {
  if (m.pid <= 0) return false;
  if (m.child) {
    int status = 0;
    if (::waitpid(m.pid, &status, WNOHANG) != 0) {  // ended and now reaped (or not ours to reap)
      m.pid = -1;
      return false;
    }
    return true;
  }
  auto st = proc_stat(m.pid);
  return st && st->first != 'Z' && st->second == m.start_time;
}

void end_namespace_mount(NamespaceMount& m, const sfs::path& image) {
  if (still_running(m)) {
    ::kill(m.pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + kEndWait;
    while (still_running(m)) {
      if (std::chrono::steady_clock::now() > deadline) {
        spdlog::warn("fuse2fs of {} did not end in 10 s after SIGTERM: killing it", image.string());
        ::kill(m.pid, SIGKILL);
        if (m.child) ::waitpid(m.pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  m.pid = -1;
  std::error_code ec;
  sfs::remove(record_of(image), ec);
}

}  // namespace runsnack::exec
