#include "sandbox/launch.hpp"

#include "core/paths.hpp"
#include "sandbox/fuse2fs_namespace.hpp"
#include "sandbox/seccomp_filter.hpp"
#include "sandbox/workspace_image.hpp"
#include "sandbox/workspace_names.hpp"
#include "sandbox/workspace_projects.hpp"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <set>

namespace runsnack::exec {

namespace sfs = std::filesystem;

SandboxUser sandbox_user(std::string_view key) {
  if (::geteuid() != 0) return {::getuid(), ::getgid(), false};
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(key.data(), key.size(), md, &len, EVP_sha256(), nullptr);
  const std::uint32_t h = (std::uint32_t(md[0]) << 24) | (std::uint32_t(md[1]) << 16) | (std::uint32_t(md[2]) << 8) | md[3];
  const uid_t uid = kSandboxUidBase + h % kSandboxUidCount;
  return {uid, static_cast<gid_t>(uid), true};
}

Result<sfs::path> workspace_for(const PeerId& consumer) {
  auto dir = state_dir();
  if (!dir) return dir.error();
  return *dir / "workspaces" / consumer.str();
}

Result<sfs::path> link_workspaces_for(std::string_view link_id) {
  // A grant id is 10 base32 characters (link.hpp); anything else must not reach a path.
  if (link_id.empty() || link_id.size() > 64 ||
      !std::all_of(link_id.begin(), link_id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
    return fail(errc::invalid_argument, "a link id of unexpected form");
  auto dir = state_dir();
  if (!dir) return dir.error();
  return *dir / "workspaces" / ("link-" + std::string(link_id));
}

std::vector<int> allowed_gpus(const Grant& grant) {
  std::vector<int> out;
  static const std::regex re("nvidia([0-9]+)");
  std::error_code ec;
  for (const auto& e : sfs::directory_iterator("/dev", ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, re)) continue;
    const int g = std::stoi(m[1]);
    if (grant.gpus.empty() || std::find(grant.gpus.begin(), grant.gpus.end(), g) != grant.gpus.end()) out.push_back(g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

LaunchLimits limits_with(std::optional<Cgroup> cgroup, const RunTerms& terms) {
  LaunchLimits out;
  if (cgroup) {
    out.cgroup.emplace(std::move(*cgroup));
    out.mode = out.cgroup->mode();
  } else {
    out.mode = "rlimits";
    if (terms.memory_bytes) out.rlimits.push_back({RLIMIT_AS, *terms.memory_bytes});
  }
  // Per uid: with a sandbox uid of its own (root provider) this binds every process the consumer runs.
  // Where the command's cgroup holds max_procs, a few more here: the group's limit then binds
  // first, and the group records it (pids.events), so the consumer is told which limit it met.
  constexpr rlim_t kBackstopSlack = 8;
  out.rlimits.push_back({RLIMIT_NPROC, out.cgroup ? terms.max_procs + kBackstopSlack : terms.max_procs});
  return out;
}

// The spare for the next command (child_process.hpp, SpareChild): a process already in a cgroup of
// its own, which gets the command's limits when taken. One at a time, made again after each take;
// none where no cgroup can be made (the command then runs under rlimits, as it would anyway).
class Spares {
 public:
  struct Spare {
    Cgroup cgroup;
    SpareChild child;
  };
  static Spares& instance() {
    static Spares spares;
    return spares;
  }
  std::optional<Spare> take() {
    std::lock_guard lock(mutex_);
    if (!spare_) return std::nullopt;
    std::optional<Spare> out(std::move(*spare_));
    spare_.reset();
    return out;
  }
  void refill() {
    std::lock_guard lock(mutex_);
    if (spare_ || given_up_) return;
    if (counter_ == 0) Cgroup::remove_stale(kPrefix, left_by_a_dead_process);
    auto cgroup = Cgroup::create(kPrefix + std::to_string(::getpid()) + "-" + std::to_string(++counter_),
                                 std::nullopt, std::nullopt);
    if (!cgroup) {
      given_up_ = true;  // no cgroups here: nothing to win
      return;
    }
    auto child = SpareChild::fork_into(cgroup->procs_fds());
    if (!child) return;
    spare_.emplace(Spare{std::move(*cgroup), std::move(*child)});
  }

 private:
  static inline const std::string kPrefix = "runsnack-spare-";  // then the provider's pid and a count
  static bool left_by_a_dead_process(const std::string& name) {
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + kPrefix.size()));
    return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
  }

  std::mutex mutex_;
  std::optional<Spare> spare_;
  std::uint64_t counter_ = 0;
  bool given_up_ = false;
};

}  // namespace

void prepare_spare() { Spares::instance().refill(); }

SpareRefill::~SpareRefill() {
  if (armed_) prepare_spare();
}

LaunchLimits prepare_limits(const RunTerms& terms, const std::string& name) {
  auto cgroup = Cgroup::create(name, terms.max_procs, terms.memory_bytes);
  return limits_with(cgroup ? std::optional<Cgroup>(std::move(*cgroup)) : std::nullopt, terms);
}

namespace {

thread_local uid_t g_owner_uid = 0;
thread_local gid_t g_owner_gid = 0;
int chown_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::lchown(path, g_owner_uid, g_owner_gid);
  return 0;
}

}  // namespace

Result<void> ensure_owned(const sfs::path& dir, const SandboxUser& user) {
  if (!user.switched) return {};  // the provider's own files, as always
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return fail(errc::io_error, "cannot stat " + dir.string() + ": " + std::strerror(errno));
  if (st.st_uid == user.uid && st.st_gid == user.gid) return {};
  g_owner_uid = user.uid;
  g_owner_gid = user.gid;
  if (::nftw(dir.c_str(), chown_entry, 32, FTW_PHYS | FTW_MOUNT) != 0)
    return fail(errc::io_error, "cannot hand " + dir.string() + " to its sandbox user");
  return {};
}

std::string quota_full_text(std::uint64_t bytes) { return "the workspace is full: " + size_text(bytes) + " quota"; }

namespace {

// A folder that could not be made for want of room: with a quota, the link's image is full.
Error folder_not_made(const Workspace& ws, const sfs::path& dir, const std::error_code& ec) {
  if (ec == std::errc::no_space_on_device && ws.quota_bytes)  // others on the link may have filled it
    return Error(errc::exhausted, quota_full_text(*ws.quota_bytes) + ", which everyone who uses this link shares");
  return Error(errc::io_error, "cannot create " + dir.string() + ": " + ec.message());
}

}  // namespace

std::string quota_notice(const Workspace& ws) {
  if (!ws.quota_bytes) return "";
  if (ws.quota_mode.starts_with("ext4 image")) {
    auto left = free_bytes(ws.path);
    // Less than a block group's worth of room: what a command writes next fails.
    if (left && *left < std::max<std::uint64_t>(1 << 20, *ws.quota_bytes / 100)) return quota_full_text(*ws.quota_bytes);
    return "";
  }
  if (ws.quota_mode == "polling" && allocated_bytes(ws.quota_dir) >= *ws.quota_bytes)
    return quota_full_text(*ws.quota_bytes);
  return "";
}

namespace {

// An earlier version's image per consumer (<consumer folder>.img): its workspaces are copied into the
// consumer's folder in the link's image, and the earlier image deleted, when the consumer has no
// workspaces there yet and they fit (the link's quota holds: cp meets the image's end). When they
// do not, they stay where they are and the provider says so; the next provider tries again.
void adopt_earlier_image(const sfs::path& own_dir, const sfs::path& consumer_dir, const SandboxUser& user,
                         ImageMounter mounter) {
  static std::mutex mutex;
  static std::set<sfs::path> tried;  // once per process and consumer folder: a copy costs what it moves
  std::lock_guard lock(mutex);
  std::error_code ec;
  if (!sfs::exists(image_path(own_dir), ec) || !tried.insert(consumer_dir).second) return;
  if (sfs::is_directory(consumer_dir, ec) && !workspace_names_in(consumer_dir).empty()) return;
  auto earlier = WorkspaceImages::instance().ensure(own_dir, 0, user.uid, user.gid, mounter);
  if (!earlier) {
    spdlog::warn("cannot mount the earlier workspace image {}: {}", image_path(own_dir).string(), earlier.error().what());
    return;
  }
  const sfs::path from = seen_through(earlier->holder, own_dir);
  std::vector<std::string> cp = {"cp", "-a", "--"};
  for (const auto& e : sfs::directory_iterator(from, ec))
    if (e.path().filename() != "lost+found") cp.push_back(e.path().string());
  sfs::create_directories(consumer_dir, ec);
  cp.push_back(consumer_dir.string() + "/");
  auto copied = cp.size() > 4 ? run_tool(cp) : Result<void>();
  if (!copied) {
    for (const auto& e : sfs::directory_iterator(consumer_dir, ec)) sfs::remove_all(e.path(), ec);
    spdlog::warn("the workspaces in {} (an earlier version's image for one consumer) do not fit the quota of the link "
                 "it uses now ({}): they stay there; a larger --disk-quota takes them in at the next start",
                 image_path(own_dir).string(), copied.error().what());
    return;
  }
  if (auto r = WorkspaceImages::instance().retire(own_dir, mounter); !r)
    spdlog::warn("cannot delete the earlier workspace image {}: {}", image_path(own_dir).string(), r.error().what());
  sfs::remove(own_dir, ec);  // only when empty: the folder may hold workspaces of links with no quota
  spdlog::info("moved the workspaces of {} into {}", image_path(own_dir).string(), consumer_dir.string());
}

}  // namespace

Result<Workspace> prepare_consumer_folder(const PeerId& consumer, std::string_view link_id, const RunTerms& terms,
                                          bool make, bool over_quota_ok) {
  auto own_dir = workspace_for(consumer);
  if (!own_dir) return own_dir.error();
  Workspace ws;
  ws.user = sandbox_user(consumer.str());
  ws.quota_bytes = terms.disk_quota_bytes;
  ws.quota_mode = "none";
  std::error_code ec;
  sfs::create_directories(own_dir->parent_path(), ec);
  remove_earlier_sync_states(*own_dir);  // beside the image, where an earlier version kept them
  if (!ws.quota_bytes) {
    ws.consumer_dir = ws.quota_dir = *own_dir;
  } else {
    auto link_dir = link_workspaces_for(link_id);
    if (!link_dir) return link_dir.error();
    ws.quota_dir = *link_dir;
    ws.quota_mode = "polling";
    const auto mounter = image_mounter();
    if (mounter) {
      // The image's root is the provider's; each consumer's folder in it is the consumer's.
      auto image = WorkspaceImages::instance().ensure(*link_dir, *ws.quota_bytes, ::geteuid(), ::getegid(), *mounter);
      if (!image && over_quota_ok && image.error().is(errc::too_large)) {
        ws.quota_mode = "over quota";
        ws.consumer_dir = ws.quota_dir / consumer.str();
        return ws;
      }
      if (!image) return image.error();
      ws.quota_mode = quota_mode_name(*mounter);
      ws.ns_holder = image->holder;
      ws.quota_dir = seen_through(image->holder, *link_dir);
    }
    sfs::create_directories(ws.quota_dir, ec);
    if (ec) return fail(errc::io_error, "cannot create " + ws.quota_dir.string() + ": " + ec.message());
    ::chmod(ws.quota_dir.c_str(), 0711);  // a sandbox user passes through to its own folder and lists no one's
    ws.consumer_dir = ws.quota_dir / consumer.str();
    if (mounter) adopt_earlier_image(*own_dir, ws.consumer_dir, ws.user, *mounter);
  }
  if (!make && !sfs::is_directory(ws.consumer_dir, ec)) return ws;
  sfs::create_directories(ws.consumer_dir, ec);
  if (ec) return folder_not_made(ws, ws.consumer_dir, ec);
  if (auto r = adopt_workspaces_folder(ws.consumer_dir); !r) return r.error();
  if (auto r = ensure_owned(ws.consumer_dir, ws.user); !r) return r.error();
  ::chmod(ws.consumer_dir.c_str(), 0700);  // the next consumer's sandbox has no business here
  return ws;
}

bool has_consumer_folder(const PeerId& consumer, std::string_view link_id, const RunTerms& terms) {
  std::error_code ec;
  auto own_dir = workspace_for(consumer);
  if (!own_dir) return false;
  if (!terms.disk_quota_bytes) return sfs::is_directory(*own_dir, ec);
  auto link_dir = link_workspaces_for(link_id);
  return link_dir && (sfs::exists(image_path(*link_dir), ec) || sfs::is_directory(*link_dir, ec) ||
                      sfs::exists(image_path(*own_dir), ec));
}

Result<Workspace> prepare_workspace(const PeerId& consumer, std::string_view link_id, const std::string& name,
                                    const RunTerms& terms) {
  auto folder = prepare_consumer_folder(consumer, link_id, terms);
  if (!folder) return folder.error();
  Workspace ws = std::move(*folder);
  ws.name = name;
  ws.path = ws.consumer_dir / name;
  ws.sync_state = sync_state_base(ws.consumer_dir, name);  // inside the image: the consumer's room
  std::error_code ec;
  if (!sfs::is_directory(ws.path, ec)) {
    if (workspace_names_in(ws.consumer_dir).size() >= kMaxWorkspacesPerConsumer)
      return fail(errc::exhausted, "you have " + std::to_string(kMaxWorkspacesPerConsumer) +
                                       " workspaces on this provider, its most: remove one (runsnack workspaces LINK "
                                       "--remove NAME) or choose one with --workspace NAME");
    sfs::create_directory(ws.path, ec);
    if (ec) return folder_not_made(ws, ws.path, ec);
  }
  if (auto r = ensure_owned(ws.path, ws.user); !r) return r.error();
  ::chmod(ws.path.c_str(), 0700);
  touch_workspace(ws.path);
  return ws;
}

namespace {

Result<fs::UniqueFd> data_fd(const std::string& text) {
  fs::UniqueFd fd(::memfd_create("runsnack-sandbox-file", MFD_CLOEXEC));
  if (!fd) return fail(errc::io_error, std::string("memfd_create: ") + std::strerror(errno));
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return fail(errc::io_error, "cannot write a sandbox file");
  ::lseek(fd.get(), 0, SEEK_SET);
  return fd;
}

std::uint64_t default_tmp_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 4 : 1ull << 30;
}

}  // namespace

Result<Launched> launch_sandboxed(LaunchRequest req) {
  Launched out;
  // A spare, where one is ready, has joined its cgroup already: only the limits are left to set.
  std::optional<Spares::Spare> spare = req.pty_slave < 0 ? Spares::instance().take() : std::nullopt;
  if (spare && !spare->cgroup.set_limits(req.terms.max_procs, req.terms.memory_bytes)) spare.reset();
  std::optional<LaunchLimits> limits;
  auto set_limits = [&](LaunchLimits made) {
    if (!req.limit_address_space) std::erase_if(made.rlimits, [](const auto& r) { return r.first == RLIMIT_AS; });
    if (req.file_size_limit) made.rlimits.push_back({RLIMIT_FSIZE, *req.file_size_limit});
    limits.reset();
    limits.emplace(std::move(made));
  };
  set_limits(spare ? limits_with(std::move(spare->cgroup), req.terms) : prepare_limits(req.terms, req.cgroup_name));

  // Descriptors for bwrap, numbered from 3 in the order they are kept.
  std::vector<int> keep;
  auto place = [&](int fd) { keep.push_back(fd); return static_cast<int>(2 + keep.size()); };
  if (req.pass_fd >= 0) place(req.pass_fd);  // descriptor 3
  fs::UniqueFd info_w;
  if (req.want_info) {
    int info[2];
    if (::pipe2(info, O_CLOEXEC | O_NONBLOCK) != 0) return fail(errc::io_error, "pipe");
    out.info = fs::UniqueFd(info[0]);
    info_w = fs::UniqueFd(info[1]);
    req.spec.fds.info = place(info_w.get());
  }
  auto seccomp = seccomp_program_fd();
  if (!seccomp) return Error(seccomp.error().code, "cannot make the sandbox's seccomp filter: " + seccomp.error().what());
  req.spec.fds.seccomp = place(seccomp->get());
  auto passwd = data_fd(Sandbox::passwd(req.user.uid, req.user.gid));
  auto group = data_fd(Sandbox::group(req.user.gid));
  if (!passwd) return passwd.error();
  if (!group) return group.error();
  req.spec.fds.passwd = place(passwd->get());
  req.spec.fds.group = place(group->get());
  // The workspace and this binary: a provider that is not root passes them as descriptors. A root
  // provider's sandbox uid cannot walk the provider's 0700 state folder, and an unprivileged bwrap
  // looks a bind's source up by path even when given a descriptor: the child stages them first,
  // where that uid can reach them (child_process.hpp).
  fs::UniqueFd workspace, self;
  std::vector<SpawnOptions::Staged> staged;
  std::string staging_dir;
  if (req.user.switched)
    for (const char* dir : {"/run", "/tmp", "/mnt"})
      if (::access(dir, F_OK) == 0) {
        staging_dir = dir;
        break;
      }
  if (!req.spec.workspace.empty()) {
    if (req.user.switched) {
      staged.push_back({req.spec.workspace.string(), "workspace", true});
      req.spec.workspace = staging_dir + "/workspace";
    } else {
      workspace = fs::UniqueFd(::open(req.spec.workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (!workspace) return fail(errc::io_error, "cannot open the workspace: " + std::string(std::strerror(errno)));
      req.spec.fds.workspace = place(workspace.get());
    }
  }
  if (req.bind_self) {
    if (req.user.switched) {
      std::error_code ec;
      const sfs::path exe = sfs::read_symlink("/proc/self/exe", ec);
      if (ec) return fail(errc::io_error, "cannot find this program: " + ec.message());
      staged.push_back({exe.string(), "self", false});
      req.spec.self_path = staging_dir + "/self";
    } else {
      self = fs::UniqueFd(::open("/proc/self/exe", O_PATH | O_CLOEXEC));
      if (!self) return fail(errc::io_error, "cannot open this program: " + std::string(std::strerror(errno)));
      req.spec.fds.self = place(self.get());
    }
  }
  // The workspace image's mount exists only in its fuse2fs's mount namespace (fuse2fs_namespace.hpp).
  fs::UniqueFd userns, mntns;
  if (req.ns_holder > 0) {
    const std::string ns = "/proc/" + std::to_string(req.ns_holder) + "/ns/";
    userns = fs::UniqueFd(::open((ns + "user").c_str(), O_RDONLY | O_CLOEXEC));
    mntns = fs::UniqueFd(::open((ns + "mnt").c_str(), O_RDONLY | O_CLOEXEC));
    if (!userns || !mntns)
      return fail(errc::io_error, "the workspace image's fuse2fs is gone: " + std::string(std::strerror(errno)));
  }
  req.spec.tmp_bytes = req.terms.memory_bytes.value_or(default_tmp_bytes());
  req.spec.network = req.terms.network;

  const Sandbox sandbox(req.spec);
  SpawnOptions opts;
  opts.argv = sandbox.argv();
  opts.envp = sandbox.envp();
  if (limits->cgroup) opts.cgroup_procs_fds = limits->cgroup->procs_fds();
  opts.rlimits = limits->rlimits;
  opts.keep_fds = keep;
  opts.pty_slave = req.pty_slave;
  opts.stdin_pipe = req.stdin_pipe && req.pty_slave < 0;
  if (req.user.switched) opts.run_as = std::pair{req.user.uid, req.user.gid};
  opts.no_new_privs = true;
  opts.staged = staged;
  opts.staging_dir = staging_dir;
  opts.userns_fd = userns.get();
  opts.mntns_fd = mntns.get();
  auto start = [&]() -> Result<ChildProcess> {
    if (spare) {
      auto in_spare = spare->child.start(opts);
      if (in_spare) return in_spare;
      // A spare that died or could not take the command: the command starts the usual way.
      spare.reset();
      set_limits(prepare_limits(req.terms, req.cgroup_name));
      opts.cgroup_procs_fds = limits->cgroup ? limits->cgroup->procs_fds() : std::vector<int>{};
      opts.rlimits = limits->rlimits;
    }
    return ChildProcess::spawn(opts);
  };
  const bool took_spare = spare.has_value();
  auto child = start();
  if (!child) return child.error();
  // The next command's spare: after this one where it took the spare; at once where there was none
  // to take (another command holds it, or this is a shell), since this start paid a fork anyway.
  if (took_spare) out.refill_spare = SpareRefill(true);
  else Spares::instance().refill();
  out.child.emplace(std::move(*child));
  if (limits->cgroup) out.cgroup.emplace(std::move(*limits->cgroup));

  out.limits = req.terms.to_json();
  out.limits["enforced_by"] = limits->mode;
  out.limits["gpus"] = req.spec.gpus;
  out.limits["uid"] = req.user.uid;
  out.limits["tmp_bytes"] = req.spec.tmp_bytes;
  out.limits["sandbox"] = std::string("bwrap: user namespace, uid ") + std::to_string(req.user.uid) +
                          ", no capabilities, seccomp";
  return out;
}

}  // namespace runsnack::exec
