#pragma once
// What run, shell, cuda and the pool's exec tasks share to start a command in
// the sandbox (sandbox.hpp): who it runs as, its workspace with the quota in
// force, the limits (a cgroup when one can be made, else rlimits) and the
// descriptors bwrap reads.
//
// Who: a root provider never runs consumer code as root. Each command runs
// as an unprivileged uid of its own, kSandboxUidBase plus a hash of a key
// (the consumer's PeerId; a pool task's folder), which no account on the
// host has and which owns nothing there but that workspace; the provider
// drops to it (setgroups, setresgid, setresuid, no_new_privs) between fork
// and exec of bwrap, which then runs unprivileged in a user namespace that
// maps only that uid. A provider run by an ordinary user runs commands as
// itself, with the same namespace, drops and filter.
//
// Quota: an ext4 image of the quota's size mounted on the consumer's folder,
// which holds all its workspaces (workspace_image.hpp: the kernel's as root,
// fuse2fs as a user, fuse2fs in a namespace of its own under no_new_privs,
// whose namespaces the command's bwrap then starts in); where no image can be
// mounted that folder is measured while a command runs
// (quota_mode "polling"), which a fast writer can outrun by what it writes in
// one poll interval.

#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "link/grant.hpp"
#include "sandbox/cgroup.hpp"
#include "sandbox/child_process.hpp"
#include "sandbox/run_terms.hpp"
#include "sandbox/sandbox.hpp"

#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runsnack::exec {

// Sandbox uids, when the provider is root: [base, base + count). systemd leaves 0x70000000 and up to
// local use; no account or container range of a Debian host lies there.
inline constexpr uid_t kSandboxUidBase = 0x70000000;
inline constexpr uid_t kSandboxUidCount = 1u << 24;
// How often the workspace is measured where no image bounds it.
inline constexpr std::chrono::milliseconds kQuotaPoll{250};

struct SandboxUser {
  uid_t uid = 0;
  gid_t gid = 0;
  bool switched = false;  // a root provider drops to it before bwrap
};

// The uid a command for `key` runs as (see above).
SandboxUser sandbox_user(std::string_view key);

struct LaunchLimits {
  std::optional<Cgroup> cgroup;                 // owns the group: its destructor kills what is left
  std::vector<std::pair<int, rlim_t>> rlimits;  // applied in the child before exec
  std::string mode;                             // "cgroup v2", "cgroup v1" or "rlimits"
};

// Where workspaces live (workspace_projects.hpp says what is in a consumer's folder):
//   a link with no disk quota:  <state dir>/workspaces/<consumer PeerId>, the consumer's folder,
//                               shared by the links without a quota it uses;
//   a link with --disk-quota:   <state dir>/workspaces/link-<grant id>, the link's folder, its
//                               quota image mounted on it, a folder per consumer inside. The
//                               quota holds for the link: everyone who uses it fills one image.
// An earlier version mounted an image per consumer on the consumer's folder (<consumer>.img):
// the first link with a quota that the consumer uses takes its workspaces in, when they fit.
Result<std::filesystem::path> workspace_for(const PeerId& consumer);
Result<std::filesystem::path> link_workspaces_for(std::string_view link_id);
// The host's /dev/nvidiaN indices that the grant shares (all of them when it names none).
std::vector<int> allowed_gpus(const Grant& grant);
// A fresh cgroup `name` with the terms' limits, or rlimits where no cgroup can be made.
LaunchLimits prepare_limits(const RunTerms& terms, const std::string& name);

struct Workspace {
  // Paths as this process reaches them (/proc/<ns_holder>/root/... when ns_holder is set).
  std::string name;                    // workspace_names.hpp
  std::filesystem::path path;          // <consumer_dir>/<name>: the command's /workspace
  std::filesystem::path consumer_dir;  // all the consumer's workspaces (under this link, with a quota)
  std::filesystem::path quota_dir;     // what the quota bounds: the link's folder (the consumer's without a quota)
  std::filesystem::path sync_state;    // the run sync's remembered state, in consumer_dir (workspace_projects.hpp)
  SandboxUser user;
  std::optional<std::uint64_t> quota_bytes;
  std::string quota_mode;  // "ext4 image", "ext4 image (fuse2fs)", "ext4 image (fuse2fs, namespace)", "polling" or "none"
  pid_t ns_holder = 0;     // the fuse2fs whose user and mount namespaces hold the image (0: none)
};

// The workspace `name` (checked by workspace_names.hpp) of `consumer`, who came through link
// `link_id` with `terms`, ready for a command or a transfer: created (mode 0700, owned by `user`),
// the link's quota image mounted where there is one, marked used now. Refused (errc::exhausted)
// when it would be one more than kMaxWorkspacesPerConsumer. Blocking (mkfs, a first chown, an
// earlier image's copy): run it off the io thread.
Result<Workspace> prepare_workspace(const PeerId& consumer, std::string_view link_id, const std::string& name,
                                    const RunTerms& terms);
// The consumer's folder alone (name, path and sync_state empty): what prepare_workspace does first.
// With `make` false a folder not there yet is not made (consumer_dir names where it would be).
// With `over_quota_ok`, where the link's files no longer fit an image of its quota (errc::too_large:
// the quota was set or lowered after they were written), the folder comes unmounted (quota_mode
// "over quota"): the consumer can still list and remove workspaces to get back under it.
Result<Workspace> prepare_consumer_folder(const PeerId& consumer, std::string_view link_id, const RunTerms& terms,
                                          bool make = true, bool over_quota_ok = false);
// Whether prepare_consumer_folder would find anything there already (it makes what it lacks: an
// image, for a mere listing, is not worth making).
bool has_consumer_folder(const PeerId& consumer, std::string_view link_id, const RunTerms& terms);
// `dir` and all below it owned by `user`, when `dir` is not yet (a workspace a provider made
// before sandbox uids, or a pool task's inputs copied by root). Symlinks are not followed.
Result<void> ensure_owned(const std::filesystem::path& dir, const SandboxUser& user);
// "the workspace is full: 50 MB quota" when the workspace has (next to) no room left, else "".
std::string quota_notice(const Workspace& ws);
// The same sentence, for a quota of `bytes`.
std::string quota_full_text(std::uint64_t bytes);

struct LaunchRequest {
  SandboxSpec spec;          // what runs and what it sees; its fds and tmp_bytes are filled in here
  RunTerms terms;            // memory, processes, network
  std::string cgroup_name;
  SandboxUser user;
  int pty_slave = -1;        // the shell's pty
  bool stdin_pipe = false;   // the command's stdin on a pipe (child->take_stdin()), else /dev/null
  int pass_fd = -1;          // becomes the command's descriptor 3 (the cuda-server's socket)
  bool want_info = false;    // bwrap --info-fd: the pid namespace's init, for signals
  bool bind_self = false;    // this binary at kSelfMount (the cuda-server is runsnack itself)
  bool limit_address_space = true;  // RLIMIT_AS where no cgroup bounds memory (the CUDA driver cannot live with it)
  std::optional<std::uint64_t> file_size_limit;  // RLIMIT_FSIZE (a quota that is only polled)
  pid_t ns_holder = 0;  // Workspace::ns_holder: bwrap starts in its user and mount namespaces
};

// Makes the next command's spare (prepare_spare) when it dies: a Launched holds one armed when its
// command took the spare, so the next is made once that command is over. Made at once instead, its
// fork, and the copy-on-write faults the provider then takes on every page it writes (12-15 us
// each on a VM), would run beside the command on its way to the exit status.
class SpareRefill {
 public:
  SpareRefill() = default;
  explicit SpareRefill(bool armed) : armed_(armed) {}
  SpareRefill(SpareRefill&& o) noexcept : armed_(std::exchange(o.armed_, false)) {}
  SpareRefill& operator=(SpareRefill&& o) noexcept {
    std::swap(armed_, o.armed_);
    return *this;
  }
  ~SpareRefill();

 private:
  bool armed_ = false;
};

struct Launched {
  SpareRefill refill_spare;  // first, so last to go: after the child is reaped
  std::optional<ChildProcess> child;
  std::optional<Cgroup> cgroup;
  fs::UniqueFd info;      // read end of --info-fd (want_info)
  nlohmann::json limits;  // the terms, and what enforces them: for the audit log and the consumer
};

// Starts the command; fails when the sandbox cannot be set up (no seccomp, no user namespaces...).
Result<Launched> launch_sandboxed(LaunchRequest request);

// Makes the spare process the next sandboxed command starts in (child_process.hpp, SpareChild):
// a provider calls it when it starts serving, so that its first command gains too. Each launch
// leaves the next one made. Nothing where no cgroup can be made.
void prepare_spare();

}  // namespace runsnack::exec
