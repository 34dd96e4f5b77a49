#include "sandbox/seccomp_filter.hpp"

#include <seccomp.h>

#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

namespace runsnack::exec {

namespace {

// Namespace flags that clone and unshare may not carry: a new user namespace
// would give the command capabilities over its own mounts and keyrings.
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
                                             CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};

using Context = std::unique_ptr<void, decltype(&seccomp_release)>;

// Socket families a command may open: local sockets, IP (the network namespace
// decides what it reaches), and netlink's route protocol (glibc's
// getaddrinfo asks it which address families are configured). The rest
// (vsock, which no namespace isolates and on a VM reaches the hypervisor;
// packet, bluetooth, AF_ALG's kernel crypto, ...) fail with EAFNOSUPPORT,
// as for a family the kernel lacks.
constexpr int kSocketFamilies[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

// Rules take one comparison per argument: "a family not listed" is one rule
// per unlisted family below the highest listed, and one for all above it.
int add_socket_family_rules(scmp_filter_ctx ctx) {
  const auto listed = [](int family) {
    return std::find(std::begin(kSocketFamilies), std::end(kSocketFamilies), family) != std::end(kSocketFamilies);
  };
  const int highest = *std::max_element(std::begin(kSocketFamilies), std::end(kSocketFamilies));
  const auto refuse = SCMP_ACT_ERRNO(EAFNOSUPPORT);
  for (int family = 0; family < highest; ++family) {
    if (listed(family)) continue;
    const scmp_datum_t f = static_cast<scmp_datum_t>(family);
    if (int r = seccomp_rule_add(ctx, refuse, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, f)); r != 0)
      return r;
  }
  const scmp_datum_t above = static_cast<scmp_datum_t>(highest) + 1;
  if (int r = seccomp_rule_add(ctx, refuse, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GE, above)); r != 0) return r;
  // Netlink: the route protocol only (audit, uevents and the rest reach beyond the namespace).
  if (int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
                               SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<scmp_datum_t>(AF_NETLINK)),
                               SCMP_A2(SCMP_CMP_NE, static_cast<scmp_datum_t>(NETLINK_ROUTE)));
      r != 0)
    return r;
  // The 32-bit multiplexer passes its arguments behind a pointer this filter
  // cannot read: ENOSYS, and glibc uses the direct calls (Linux >= 4.3).
  if (const int nr = seccomp_syscall_resolve_name("socketcall"); nr != __NR_SCMP_ERROR)
    (void)seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
  return 0;
}

Result<std::vector<std::uint8_t>> build_program() {
  Context ctx(seccomp_init(SCMP_ACT_ALLOW), seccomp_release);
  if (!ctx) return fail(errc::unsupported, "seccomp: cannot make a filter");
  // The 32-bit ABIs reach the same kernel: they get the same rules (else a filter for x86_64
  // alone would kill every 32-bit program, which libseccomp's bad-arch action does).
  if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
    (void)seccomp_arch_add(ctx.get(), SCMP_ARCH_X86);
    (void)seccomp_arch_add(ctx.get(), SCMP_ARCH_X32);
  }
  auto deny = [&](int nr, std::uint32_t action) { return seccomp_rule_add(ctx.get(), action, nr, 0); };
  for (const auto& name : denied_syscalls()) {
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // not a system call on this architecture
    (void)deny(nr, SCMP_ACT_ERRNO(EPERM));  // an ABI without it is skipped by libseccomp
  }
  if (const int nr = seccomp_syscall_resolve_name("clone3"); nr != __NR_SCMP_ERROR) (void)deny(nr, SCMP_ACT_ERRNO(ENOSYS));
  for (unsigned long flag : kNamespaceFlags) {
    const scmp_datum_t f = flag;
    if (seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f)) != 0 ||
        seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f)) != 0)
      return fail(errc::unsupported, "seccomp: cannot add the namespace rules");
  }
  if (add_socket_family_rules(ctx.get()) != 0) return fail(errc::unsupported, "seccomp: cannot add the socket rules");
  // TIOCSTI pushes bytes into a terminal's input as if typed (the kernel reads the low 32 bits).
  if (seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<scmp_datum_t>(TIOCSTI))) != 0)
    return fail(errc::unsupported, "seccomp: cannot add the TIOCSTI rule");

  fs::UniqueFd mem(::memfd_create("runsnack-seccomp", MFD_CLOEXEC));
  if (!mem) return fail(errc::io_error, std::string("memfd_create: ") + std::strerror(errno));
  if (seccomp_export_bpf(ctx.get(), mem.get()) != 0) return fail(errc::unsupported, "seccomp: cannot export the filter");
  const off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0) return fail(errc::unsupported, "seccomp: empty filter");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  auto n = fs::read_full(mem.get(), bytes, 0, true);
  if (!n || *n != bytes.size()) return fail(errc::io_error, "seccomp: cannot read the filter back");
  return bytes;
}

}  // namespace

const std::vector<std::string>& denied_syscalls() {
  static const std::vector<std::string> names = {
      // The "shocker" escape: a file handle opens any inode of the filesystem behind a mount.
      "open_by_handle_at", "name_to_handle_at",
      // Mounts, old and new API.
      "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
      "mount_setattr",
      // Keyrings are not namespaced.
      "keyctl", "add_key", "request_key",
      // Kernel programs, profiling and page-fault handling in user space: frequent exploit paths.
      "bpf", "perf_event_open", "userfaultfd",
      // io_uring runs the operations it queues without this filter seeing them.
      "io_uring_setup", "io_uring_enter", "io_uring_register",
      // The kernel itself.
      "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
      "get_kernel_syms", "query_module", "reboot", "syslog", "acct", "swapon", "swapoff", "quotactl", "quotactl_fd",
      "lookup_dcookie", "nfsservctl", "uselib", "vm86", "vm86old", "iopl", "ioperm",
      // Other namespaces and other processes' memory.
      "setns", "process_vm_readv", "process_vm_writev", "kcmp",
      // The clock is the host's.
      "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime"};
  return names;
}

Result<fs::UniqueFd> seccomp_program_fd() {
  static std::once_flag once;
  static Result<std::vector<std::uint8_t>> program = fail(errc::unsupported, "seccomp: not built");
  std::call_once(once, [] { program = build_program(); });
  if (!program) return program.error();
  fs::UniqueFd mem(::memfd_create("runsnack-seccomp", MFD_CLOEXEC));
  if (!mem) return fail(errc::io_error, std::string("memfd_create: ") + std::strerror(errno));
  std::size_t off = 0;
  while (off < program->size()) {
    const ssize_t w = ::write(mem.get(), program->data() + off, program->size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail(errc::io_error, "seccomp: cannot write the filter");
    off += static_cast<std::size_t>(w);
  }
  ::lseek(mem.get(), 0, SEEK_SET);
  return mem;
}

}  // namespace runsnack::exec
