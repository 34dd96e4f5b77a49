// The seccomp filter (seccomp_filter.hpp), loaded for real in a forked child: what it denies fails
// with EPERM (clone3 with ENOSYS), what programs need still works.
#include "sandbox/seccomp_filter.hpp"

#include <gtest/gtest.h>

#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <tuple>
#include <vector>

namespace runsnack::exec {
namespace {

// Runs `probe` in a child under the filter; its exit status (0 = as expected).
int under_filter(int (*probe)()) {
  auto fd = seccomp_program_fd();
  if (!fd) return 100;
  std::vector<std::uint8_t> bytes(64 * 1024);
  const ssize_t n = ::read(fd->get(), bytes.data(), bytes.size());
  if (n <= 0 || n % sizeof(sock_filter) != 0) return 101;
  const pid_t pid = ::fork();
  if (pid == 0) {
    sock_fprog prog{static_cast<unsigned short>(n / sizeof(sock_filter)), reinterpret_cast<sock_filter*>(bytes.data())};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
      _exit(102);
    _exit(probe());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

int eperm(long r) { return r < 0 && errno == EPERM ? 0 : 1; }

TEST(SeccompFilter, DeniesTheKernelsPrivilegedSurface) {
  EXPECT_EQ(under_filter([] { return eperm(::syscall(SYS_open_by_handle_at, -100, nullptr, 0)); }), 0);
  EXPECT_EQ(under_filter([] { return eperm(::syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, nullptr)); }), 0);
  EXPECT_EQ(under_filter([] { return eperm(::syscall(SYS_keyctl, 1, nullptr)); }), 0);
  EXPECT_EQ(under_filter([] { return eperm(::syscall(SYS_bpf, 0, nullptr, 0)); }), 0);
  EXPECT_EQ(under_filter([] { return eperm(::syscall(SYS_unshare, CLONE_NEWUSER)); }), 0);
  EXPECT_EQ(under_filter([] { return eperm(::syscall(SYS_setns, 0, 0)); }), 0);
  EXPECT_EQ(under_filter([] { return eperm(::syscall(SYS_userfaultfd, 0)); }), 0);
  EXPECT_EQ(under_filter([] {
              const long r = ::syscall(SYS_clone3, nullptr, 0);
              return r < 0 && errno == ENOSYS ? 0 : 1;
            }),
            0);
}

TEST(SeccompFilter, OpensOnlyTheSocketFamiliesACommandNeeds) {
  // vsock (not namespaced: a VM provider's hypervisor), packet, bluetooth, kernel crypto: refused.
  for (int family : {AF_VSOCK, AF_PACKET, AF_BLUETOOTH, AF_ALG, AF_KEY, AF_APPLETALK, 45, 200}) {
    static int f;
    f = family;
    EXPECT_EQ(under_filter([] {
                const long r = ::syscall(SYS_socket, f, SOCK_STREAM, 0);
                return r < 0 && errno == EAFNOSUPPORT ? 0 : 1;
              }),
              0)
        << family;
  }
  // The upper half of the argument does not hide a family (the kernel reads an int).
  EXPECT_EQ(under_filter([] {
              const long r = ::syscall(SYS_socket, 0x100000000L | AF_VSOCK, SOCK_STREAM, 0);
              return r < 0 && errno == EAFNOSUPPORT ? 0 : 1;
            }),
            0);
  EXPECT_EQ(under_filter([] {
              const long r = ::syscall(SYS_socket, AF_NETLINK, SOCK_RAW, NETLINK_AUDIT);
              return r < 0 && errno == EPROTONOSUPPORT ? 0 : 1;
            }),
            0);
  // What programs use still opens.
  EXPECT_EQ(under_filter([] {
              for (auto [family, type, protocol] : {std::tuple{AF_UNIX, SOCK_STREAM, 0}, std::tuple{AF_INET, SOCK_DGRAM, 0},
                                                    std::tuple{AF_INET6, SOCK_STREAM, 0},
                                                    std::tuple{AF_NETLINK, SOCK_RAW, NETLINK_ROUTE}}) {
                const int fd = ::socket(family, type, protocol);
                if (fd < 0) return 1;
                ::close(fd);
              }
              return 0;
            }),
            0);
}

TEST(SeccompFilter, ProgramsStillWork) {
  // fork (clone without namespace flags), threads, unshare of nothing namespaced, files.
  EXPECT_EQ(under_filter([] {
              const pid_t p = ::fork();
              if (p == 0) _exit(0);
              int st = 0;
              if (p < 0 || ::waitpid(p, &st, 0) != p) return 1;
              if (::syscall(SYS_unshare, CLONE_FILES) != 0) return 2;
              return ::access("/proc/self/status", R_OK) == 0 ? 0 : 3;
            }),
            0);
}

TEST(SeccompFilter, ListsTheShockerCalls) {
  const auto& names = denied_syscalls();
  for (const char* name : {"open_by_handle_at", "name_to_handle_at", "mount", "keyctl", "bpf", "perf_event_open",
                           "userfaultfd", "setns", "init_module", "kexec_load"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
}

}  // namespace
}  // namespace runsnack::exec
