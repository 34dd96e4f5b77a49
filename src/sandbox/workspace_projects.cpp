#include "sandbox/workspace_projects.hpp"

#include "sandbox/workspace_image.hpp"
#include "sandbox/workspace_names.hpp"
#include "fs/safe_fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>

namespace runsnack::exec {

namespace sfs = std::filesystem;

namespace {

// In a consumer's folder: says its entries are workspaces (not an earlier version's files).
constexpr const char* kMarker = ".runsnack-workspaces";
// A workspace being deleted, renamed first so that nothing starts in it meanwhile.
constexpr const char* kRemovingPrefix = ".removing-";
// The workspaces' sync states (sync_state_base).
constexpr const char* kSyncStateFolder = ".runsnack-sync";

std::mutex& adopt_mutex() {
  static std::mutex mu;
  return mu;
}

// The name rule already leaves out lost+found, the marker and folders being removed.
bool is_workspace_entry(const std::string& name) { return checked_workspace_name(name).has_value(); }

std::string random_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device rd;
  return std::to_string(rd()) + "-" + std::to_string(++counter);
}

// Opens folder `name` in `dir` without following a symlink.
fs::UniqueFd open_folder_at(int dir, const char* name) {
  return fs::UniqueFd(::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Deletes the folder `parent`/`leaf` and all it holds through descriptors: a symlink is removed, never
// followed. Depth-first without recursion (a command may nest folders deeper than any stack): one
// folder open at a time, back up through "..", which nothing moves meanwhile (the folder was renamed
// out of reach and no command runs in it).
Result<void> remove_tree_at(int parent, const std::string& leaf) {
  auto failed = [&](const std::string& what) { return fail(errc::io_error, "cannot " + what + ": " + std::strerror(errno)); };
  fs::UniqueFd cur = open_folder_at(parent, leaf.c_str());
  if (!cur) return failed("open " + leaf);
  (void)::fchmod(cur.get(), 0700);  // a folder its command made read-only (a provider that is not root needs w)
  std::vector<std::string> below;  // the folders entered under `leaf`, outermost first
  for (;;) {
    const int dup = ::dup(cur.get());
    DIR* dir = dup >= 0 ? ::fdopendir(dup) : nullptr;
    if (!dir) {
      if (dup >= 0) ::close(dup);
      return failed("read a folder");
    }
    std::string sub;
    while (dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (::unlinkat(cur.get(), name.c_str(), 0) == 0 || errno == ENOENT) continue;
      if (errno != EISDIR && errno != EPERM) {
        ::closedir(dir);
        return failed("remove " + name);
      }
      sub = name;
      break;
    }
    ::closedir(dir);
    if (!sub.empty()) {
      fs::UniqueFd next = open_folder_at(cur.get(), sub.c_str());
      if (!next) return failed("open " + sub);
      (void)::fchmod(next.get(), 0700);
      below.push_back(sub);
      cur = std::move(next);
      continue;
    }
    if (below.empty()) break;
    fs::UniqueFd up = open_folder_at(cur.get(), "..");
    if (!up) return failed("go back up");
    if (::unlinkat(up.get(), below.back().c_str(), AT_REMOVEDIR) != 0) return failed("remove " + below.back());
    below.pop_back();
    cur = std::move(up);
  }
  cur = fs::UniqueFd();
  if (::unlinkat(parent, leaf.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return failed("remove " + leaf);
  return {};
}

std::mutex& uses_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<sfs::path, int>& uses() {
  static std::map<sfs::path, int> m;
  return m;
}

}  // namespace

Result<void> adopt_workspaces_folder(const sfs::path& consumer_dir) {
  static std::set<sfs::path> adopted;  // by this process: checked once
  std::lock_guard lock(adopt_mutex());
  if (adopted.contains(consumer_dir)) return {};
  std::error_code ec;
  const bool marked = sfs::exists(consumer_dir / kMarker, ec);
  std::vector<sfs::path> old, left;
  for (const auto& e : sfs::directory_iterator(consumer_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(kRemovingPrefix)) left.push_back(e.path());  // a removal a killed provider did not finish
    else if (!marked && name != "lost+found" && name != kSyncStateFolder) old.push_back(e.path());
  }
  if (ec) return fail(errc::io_error, "cannot read " + consumer_dir.string() + ": " + ec.message());
  if (!left.empty()) {
    fs::UniqueFd parent(::open(consumer_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (const auto& p : left)
      if (parent) (void)remove_tree_at(parent.get(), p.filename().string());
  }
  if (marked) {
    adopted.insert(consumer_dir);
    return {};
  }
  if (!old.empty()) {
    // Through a folder of another name: the old files may hold one called "default".
    const sfs::path moving = consumer_dir / (std::string(kRemovingPrefix) + "adopt-" + random_suffix());
    sfs::create_directory(moving, ec);
    if (ec) return fail(errc::io_error, "cannot create " + moving.string() + ": " + ec.message());
    for (const auto& p : old) {
      sfs::rename(p, moving / p.filename(), ec);
      if (ec) return fail(errc::io_error, "cannot move " + p.string() + " into the workspace default: " + ec.message());
    }
    sfs::rename(moving, consumer_dir / kDefaultWorkspace, ec);
    if (ec) return fail(errc::io_error, "cannot move the earlier workspace to default: " + ec.message());
  }
  const int fd = ::open((consumer_dir / kMarker).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail(errc::io_error, "cannot mark " + consumer_dir.string() + ": " + std::strerror(errno));
  ::close(fd);
  adopted.insert(consumer_dir);
  return {};
}

std::vector<std::string> workspace_names_in(const sfs::path& consumer_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : sfs::directory_iterator(consumer_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_workspace_entry(name) && e.is_directory(ec) && !e.is_symlink(ec)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

sfs::path sync_state_base(const sfs::path& consumer_dir, const std::string& name) {
  return consumer_dir / kSyncStateFolder / name;
}

void remove_earlier_sync_states(const sfs::path& consumer_dir) {
  static std::mutex mu;
  static std::set<sfs::path> done;  // by this process
  std::lock_guard lock(mu);
  if (!done.insert(consumer_dir).second) return;
  // <PeerId>.sync.manifest, <PeerId>.sync.<name>.hashes, ... (a PeerId has a fixed length, no dot).
  const std::string prefix = consumer_dir.filename().string() + ".sync";
  fs::UniqueFd parent(::open(consumer_dir.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return;
  const int dup = ::dup(parent.get());
  DIR* dir = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (!dir) {
    if (dup >= 0) ::close(dup);
    return;
  }
  std::vector<std::string> earlier;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (!name.starts_with(prefix) || (name.size() > prefix.size() && name[prefix.size()] != '.')) continue;
    for (const char* suffix : {".manifest", ".hashes", ".manifest.tmp", ".hashes.tmp"})
      if (name.ends_with(suffix)) earlier.push_back(name);
  }
  ::closedir(dir);
  for (const auto& name : earlier) ::unlinkat(parent.get(), name.c_str(), 0);
}

WorkspaceUses::Use WorkspaceUses::begin(const sfs::path& workspace) {
  {
    std::lock_guard lock(uses_mutex());
    ++uses()[workspace];
  }
  return Use(nullptr, [workspace](void*) {
    std::lock_guard lock(uses_mutex());
    if (auto it = uses().find(workspace); it != uses().end() && --it->second <= 0) uses().erase(it);
  });
}

bool WorkspaceUses::busy(const sfs::path& workspace) {
  std::lock_guard lock(uses_mutex());
  return uses().contains(workspace);
}

void touch_workspace(const sfs::path& dir) { ::utimensat(AT_FDCWD, dir.c_str(), nullptr, AT_SYMLINK_NOFOLLOW); }

std::vector<WorkspaceSummary> summarize_workspaces(const sfs::path& consumer_dir) {
  std::vector<WorkspaceSummary> out;
  for (const auto& name : workspace_names_in(consumer_dir)) {
    const sfs::path dir = consumer_dir / name;
    WorkspaceSummary s;
    s.name = name;
    s.bytes = allocated_bytes(dir);
    for (const char* suffix : {".manifest", ".hashes"}) {  // its sync state takes the same quota
      struct stat state{};
      if (::lstat((sync_state_base(consumer_dir, name).string() + suffix).c_str(), &state) == 0)
        s.bytes += static_cast<std::uint64_t>(state.st_blocks) * 512;
    }
    struct stat st{};
    if (::lstat(dir.c_str(), &st) == 0) s.last_used_unix = st.st_mtim.tv_sec;
    s.in_use = WorkspaceUses::busy(dir);
    out.push_back(std::move(s));
  }
  return out;
}

Result<void> remove_workspace(const sfs::path& consumer_dir, const std::string& name) {
  auto checked = checked_workspace_name(name);
  if (!checked) return checked.error();
  const sfs::path dir = consumer_dir / name;
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(errc::not_found, "there is no workspace '" + name + "' (runsnack workspaces LINK lists them)");
  if (WorkspaceUses::busy(dir))
    return fail(errc::refused, "a command is running in workspace '" + name + "': wait for it to end, then remove it");
  const std::string away = std::string(kRemovingPrefix) + random_suffix();
  if (::rename(dir.c_str(), (consumer_dir / away).c_str()) != 0)
    return fail(errc::io_error, "cannot remove workspace '" + name + "': " + std::strerror(errno));
  const sfs::path state = sync_state_base(consumer_dir, name);
  for (const char* suffix : {".manifest", ".hashes", ".manifest.tmp", ".hashes.tmp"}) {
    sfs::path f = state;
    f += suffix;
    ::unlink(f.c_str());
  }
  fs::UniqueFd parent(::open(consumer_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return fail(errc::io_error, "cannot open " + consumer_dir.string() + ": " + std::strerror(errno));
  return remove_tree_at(parent.get(), away);
}

}  // namespace runsnack::exec
