#pragma once
// The bubblewrap sandbox a consumer's command runs in (docs/ARCHITECTURE.md
// section 6), as a pure description turned into bwrap's argv and the
// environment; no process is started here (exec/child_process.hpp does that),
// so the run service, shell and the pool worker share one policy.
//
// What the command sees: the provider's system read-only (/usr, /etc with
// secrets masked and a passwd/group of its own, /opt; /bin, /lib*, /sbin as
// on the host), the workspace read-write at /workspace (its cwd and $HOME),
// size-bounded tmpfs at /tmp and /dev/shm (tmp_bytes each: the memory limit,
// and in a cgroup their pages count against it), a tiny /run, fresh /proc
// and /dev, everything else of its root read-only, own user, pid, ipc, uts
// (and cgroup) namespaces, no network unless allowed, only the allowed GPUs'
// /dev/nvidia* nodes and CUDA_VISIBLE_DEVICES. Nothing else of the host: not
// /root, /home, the host's /run, nor `hidden` paths (the provider's state
// folder), which are covered with an empty tmpfs when they lie under a bound
// folder.
//
// Privileges: bwrap always runs unprivileged (a root provider first drops to
// the command's own uid, launch.hpp), in a user namespace that maps only that
// uid, with --cap-drop ALL, --disable-userns (no nested user namespace),
// no_new_privs and the seccomp filter (seccomp_filter.hpp): inside, CapEff is
// 0 and open_by_handle_at, mount, keyctl, bpf ... fail with EPERM.
// --die-with-parent always; --new-session (which stops a command from
// pushing input into the provider's terminal with TIOCSTI) except for the
// shell, which runs on its own fresh pty as controlling terminal (setsid +
// TIOCSCTTY by child_process.hpp): there the only terminal it can reach is
// its own, and job control needs it.
//
// Descriptors bwrap reads (the passwd and group files, the filter, --info-fd,
// and for a provider that is not root the workspace and this binary as
// O_PATH descriptors) are named by number in `fds`; the launcher places them
// there. bwrap closes each once used: none reaches the command. (bwrap finds a
// bind's source by path even when given a descriptor, so a root provider
// stages the workspace where the sandbox uid can reach it instead: launch.hpp.)

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::exec {

inline constexpr const char* kWorkspaceMount = "/workspace";
// Where a command that is this binary (the cuda-server) finds it inside.
inline constexpr const char* kSelfMount = "/run/runsnack/runsnack";
// /run holds nothing of ours but kSelfMount's mount point.
inline constexpr std::uint64_t kRunTmpfsBytes = 1 << 20;
// The name of the command's user inside (its uid is the provider's choice, launch.hpp).
inline constexpr const char* kSandboxUserName = "runsnack";

struct SandboxLimits {
  std::optional<std::uint64_t> memory_bytes;  // cgroup memory.max, else RLIMIT_AS
  std::optional<std::uint64_t> max_procs;     // cgroup pids.max, else RLIMIT_NPROC
  std::optional<std::uint64_t> open_files;    // RLIMIT_NOFILE
};

// Descriptor numbers in the child (-1: none); see the header comment.
struct SandboxFds {
  int info = -1;       // bwrap --info-fd: the pid namespace's init, as JSON
  int seccomp = -1;    // the BPF program
  int passwd = -1;     // contents of /etc/passwd inside
  int group = -1;      // contents of /etc/group inside
  int workspace = -1;  // O_PATH of the workspace folder (else `workspace` is bound by path)
  int self = -1;       // O_PATH of this binary, bound at kSelfMount (else self_path, when set)
};

struct SandboxSpec {
  std::filesystem::path workspace;  // host folder, bound read-write; empty: a small empty tmpfs instead
  std::vector<std::string> argv;    // the command, run inside
  std::map<std::string, std::string> env;  // added to the sandbox's base environment
  SandboxLimits limits;
  std::vector<int> gpus;            // GPU indices the command may use (device nodes + CUDA_VISIBLE_DEVICES)
  bool network = false;             // false: --unshare-net (only an empty loopback)
  std::vector<std::filesystem::path> hidden;  // host paths that must not be visible
  SandboxFds fds;
  std::filesystem::path self_path;  // this binary, bound at kSelfMount (when fds.self is not set)
  std::uint64_t tmp_bytes = 0;      // size of /tmp and of /dev/shm (0: bwrap's default, half the RAM)
  bool own_pty = false;             // the command's stdio is a pty of its own: no --new-session
  std::string bwrap = "/usr/bin/bwrap";
};

// How the host looks, as a seam for tests: whether `p` exists, and whether it is a symlink (and to what).
struct HostView {
  std::function<bool(const std::filesystem::path&)> exists;
  std::function<std::optional<std::string>(const std::filesystem::path&)> symlink_target;
  static HostView real();
};

class Sandbox {
 public:
  explicit Sandbox(SandboxSpec spec, HostView host = HostView::real()) : spec_(std::move(spec)), host_(std::move(host)) {}

  // bwrap's full argv, ending with "--" and the command.
  std::vector<std::string> argv() const;
  // The command's whole environment (nothing of the provider's own environment leaks in).
  std::vector<std::string> envp() const;
  // /etc/passwd and /etc/group inside: root, the command's user (kSandboxUserName) and nobody.
  static std::string passwd(uid_t uid, gid_t gid);
  static std::string group(gid_t gid);
  const SandboxSpec& spec() const { return spec_; }

 private:
  SandboxSpec spec_;
  HostView host_;
};

}  // namespace runsnack::exec
