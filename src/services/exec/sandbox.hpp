#pragma once
// The bubblewrap sandbox a consumer's command runs in (ARCHITECTURE.md
// section 6), as a pure description turned into bwrap's argv and the
// environment; no process is started here (exec/child_process.hpp does that),
// so the run service, shell and the pool worker share one policy.
//
// What the command sees: the provider's system read-only (/usr, /etc with
// secrets masked, /opt; /bin, /lib*, /sbin as on the host), the workspace
// read-write at /workspace (its cwd and $HOME), a private /tmp, fresh /proc
// and /dev, own pid, ipc, uts (and cgroup) namespaces, no network unless
// allowed, only the allowed GPUs' /dev/nvidia* nodes and CUDA_VISIBLE_DEVICES.
// Nothing else of the host: not /root, /home, /run, nor `hidden` paths (the
// provider's state folder), which are covered with an empty tmpfs when they
// lie under a bound folder. --die-with-parent always; --new-session (which
// stops a command from pushing input into the provider's terminal with
// TIOCSTI) except for the shell, which runs on its own fresh pty as
// controlling terminal (setsid + TIOCSCTTY by child_process.hpp): there the
// only terminal it can reach is its own, and job control needs it.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::exec {

inline constexpr const char* kWorkspaceMount = "/workspace";

struct SandboxLimits {
  std::optional<std::uint64_t> memory_bytes;  // cgroup memory.max, else RLIMIT_AS
  std::optional<std::uint64_t> max_procs;     // cgroup pids.max, else RLIMIT_NPROC
  std::optional<std::uint64_t> open_files;    // RLIMIT_NOFILE
};

struct SandboxSpec {
  std::filesystem::path workspace;  // host folder, bound read-write
  std::vector<std::string> argv;    // the command, run inside
  std::map<std::string, std::string> env;  // added to the sandbox's base environment
  SandboxLimits limits;
  std::vector<int> gpus;            // GPU indices the command may use (device nodes + CUDA_VISIBLE_DEVICES)
  bool network = false;             // false: --unshare-net (only an empty loopback)
  std::vector<std::filesystem::path> hidden;  // host paths that must not be visible
  int info_fd = -1;                 // bwrap --info-fd (child pid), or -1
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
  const SandboxSpec& spec() const { return spec_; }

 private:
  SandboxSpec spec_;
  HostView host_;
};

}  // namespace runsnack::exec
