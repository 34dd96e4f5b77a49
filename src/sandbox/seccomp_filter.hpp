#pragma once
// The seccomp filter every sandboxed command runs under (bubblewrap's
// --seccomp FD loads it just before it execs the command), modelled on the
// default profiles of Docker and podman: everything is allowed except the
// system calls that reach the kernel's privileged or rarely-hardened
// surface, which fail with EPERM:
//
//   open_by_handle_at, name_to_handle_at (the "shocker" escape), mount and
//   the new mount API, umount2, pivot_root, keyctl, add_key, request_key,
//   bpf, perf_event_open, userfaultfd, kexec_*, *_module, setns, unshare and
//   clone with a CLONE_NEW* flag, io_uring_* (it bypasses this filter for
//   the operations it queues), process_vm_*, kcmp, acct, swapon/off,
//   reboot, syslog, quotactl, the clock setters, iopl/ioperm, TIOCSTI
//   (typing into a terminal), and the obsolete calls Docker denies too.
//
// clone3 fails with ENOSYS instead (its flags are behind a pointer that a
// filter cannot read), so that glibc falls back to clone, whose flags it can;
// so does the 32-bit socketcall multiplexer. socket() opens only AF_UNIX,
// AF_INET, AF_INET6 and netlink's route protocol: other families (AF_VSOCK,
// which no namespace isolates, packet, bluetooth, AF_ALG, ...) fail with
// EAFNOSUPPORT, other netlink protocols with EPROTONOSUPPORT.
// ptrace is allowed, as in Docker: a command sees only its own pid namespace,
// under its own uid (gdb, strace and py-spy work). personality is allowed:
// its flags (ASLR off, READ_IMPLIES_EXEC) weaken only the calling command's
// own processes, and mapping page zero still needs CAP_SYS_RAWIO
// (mmap_min_addr), which a command never has. On x86_64 the 32-bit ABIs get
// the same rules.
//
// Built with libseccomp once per process; each launch gets the compiled BPF
// program on a fresh memfd, since bubblewrap reads it from the descriptor.

#include "core/error.hpp"
#include "fs/safe_fs.hpp"

#include <string>
#include <vector>

namespace runsnack::exec {

// The system calls denied with EPERM (for docs and tests).
const std::vector<std::string>& denied_syscalls();

// A descriptor, at offset 0, holding the filter as a BPF program (struct sock_filter[]).
Result<fs::UniqueFd> seccomp_program_fd();

}  // namespace runsnack::exec
