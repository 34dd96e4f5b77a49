#include "services/exec/workspace_transfer.hpp"

#include "core/json_fields.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/run_terms.hpp"
#include "services/exec/service_replies.hpp"
#include "fs/offload.hpp"
#include "fs/path_rules.hpp"
#include "fs/tree_scan.hpp"
#include "fs/transfer.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace runsnack::exec {

namespace asio = boost::asio;
namespace sfs = std::filesystem;

namespace {

constexpr std::size_t kMaxPullPaths = 256;

void audit(const ExecContext& ctx, const std::string& kind, const std::string& decision, const std::string& reason,
           nlohmann::json detail) {
  audit_event(ctx, kind, decision, reason, std::move(detail));
}

// Each consumer's SyncState, kept in this process between syncs: loading a 16k-entry state from
// disk took as long as checking the workspace against it. A sync takes its consumer's state out
// (a second sync at the same time loads its own from disk) and puts it back after a sync that
// succeeded; after a failed one the next sync loads the state last saved.
class KeptSyncStates {
 public:
  std::unique_ptr<fs::SyncState> take(const std::string& key, const sfs::path& base) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = states_.find(key); it != states_.end()) {
        auto state = std::move(it->second);
        states_.erase(it);
        return state;
      }
    }
    auto state = std::make_unique<fs::SyncState>();
    state->load(base);
    return state;
  }
  void put_back(const std::string& key, std::unique_ptr<fs::SyncState> state) {
    std::lock_guard lock(mutex_);
    if (states_.size() >= kMaxKept) states_.erase(states_.begin());  // a state that is not here is loaded from disk
    states_[key] = std::move(state);
  }

 private:
  static constexpr std::size_t kMaxKept = 16;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<fs::SyncState>> states_;
};

KeptSyncStates& kept_sync_states() {
  static KeptSyncStates states;
  return states;
}

std::optional<fs::Owner> owner_of(const Workspace& ws) {
  if (!ws.user.switched) return std::nullopt;
  return fs::Owner{ws.user.uid, ws.user.gid};
}

// "out/" names "out": what users type. A path that is only slashes stays refused.
std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// A workspace path as the consumer named it (cp, --pull), resolved with the symlinks on its way
// followed (path_rules.hpp resolve_inside; the last one with `follow_last`): one that leads out
// of the workspace is refused. What is then opened is walked without following any symlink
// (safe_fs.hpp), so a symlink a command swaps in meanwhile makes that fail instead.
Result<std::string> resolve_named(int root, const std::string& path, bool follow_last) {
  if (auto parts = fs::split_relative_path(path); !parts) return parts.error();
  const fs::LinkLookup link_of = [root](const std::string& p) { return fs::link_target_at(root, p); };
  auto resolved = fs::resolve_inside(path, link_of, follow_last);
  if (!resolved)
    return fail(errc::refused, "refused path '" + path.substr(0, 200) +
                                   "': a symlink on its way leads outside the workspace (or loops)");
  return *resolved;
}

// What a consumer-named top path holds after resolution: a folder, a file, a symlink, or nothing.
// A stat, no more (no file is read).
std::string kind_at(int root, const std::string& resolved) {
  if (resolved.empty()) return "dir";
  std::string leaf;
  auto dir = fs::open_parent(root, resolved, false, &leaf);
  struct stat st{};
  if (!dir || ::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return "none";
  return S_ISDIR(st.st_mode) ? "dir" : S_ISLNK(st.st_mode) ? "link" : S_ISREG(st.st_mode) ? "file" : "other";
}

}  // namespace

asio::awaitable<void> serve_sync(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::string dest, bool whole) {
  const char* kind = whole ? "sync" : "cp_put";
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  dest = without_trailing_slashes(std::move(dest));
  if (!dest.empty())
    if (auto parts = fs::split_relative_path(dest); !parts) {
      audit(ctx, kind, "refuse", parts.error().what(), {{"dest", dest}});
      co_return co_await refuse(*stream, parts.error());
    }
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.workspace, terms); });
  if (!ws) co_return co_await refuse(*stream, ws.error());
  const std::optional<fs::Owner> owner = owner_of(*ws);
  auto root = fs::open_root(ws->path, false);
  if (!root) co_return co_await refuse(*stream, root.error());
  // cp into a folder: a symlink on the way (the destination's own too) is followed while it stays inside.
  auto target = co_await fs::offload([&]() -> Result<fs::UniqueFd> {
    auto resolved = dest.empty() ? Result<std::string>(std::string()) : resolve_named(root->get(), dest, true);
    if (!resolved) return resolved.error();
    return fs::open_dir(root->get(), *resolved, true, owner ? &*owner : nullptr);
  });
  if (!target) {
    audit(ctx, kind, "refuse", target.error().what(), {{"dest", dest}});
    co_return co_await refuse(*stream, target.error());
  }
  // The run sync keeps a SyncState (fast no-change answer, deletions); cp does not.
  const sfs::path& state_base = ws->sync_state;
  std::unique_ptr<fs::SyncState> state;
  if (whole) state = co_await fs::offload([&] { return kept_sync_states().take(state_base.string(), state_base); });
  fs::ReceiveLimits limits;
  limits.quota_bytes = terms.disk_quota_bytes;
  limits.write.owner = owner;
  if (ws->quota_bytes) limits.write.full_message = quota_full_text(*ws->quota_bytes);
  const fs::Progress no_progress;
  auto stats = co_await fs::receive_tree(*stream, target->get(), limits, state.get(), no_progress);
  if (state && stats) {
    const bool save = !stats->unchanged;
    co_await fs::offload([&] {
      if (save) state->save(state_base);
      kept_sync_states().put_back(state_base.string(), std::move(state));
    });
  }
  if (!stats) {
    audit(ctx, kind, "refuse", stats.error().what(), {{"dest", dest}});
    (void)co_await stream->close_write();
    co_return;
  }
  audit(ctx, kind, "accept", "", {{"dest", dest}, {"entries", stats->entries}, {"files", stats->files_sent},
                                  {"bytes", stats->bytes}, {"deleted", stats->deleted}});
  (void)co_await stream->close_write();
}

asio::awaitable<void> serve_stat(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::string path) {
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  path = without_trailing_slashes(std::move(path));
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.workspace, terms); });
  if (!ws) co_return co_await refuse(*stream, ws.error());
  auto root = fs::open_root(ws->path, false);
  if (!root) co_return co_await refuse(*stream, root.error());
  auto kind = co_await fs::offload([&]() -> Result<std::string> {
    if (path.empty()) return std::string("dir");
    auto resolved = resolve_named(root->get(), path, true);
    if (!resolved) return resolved.error();
    return kind_at(root->get(), *resolved);
  });
  if (!kind) {
    audit(ctx, "cp_put", "refuse", kind.error().what(), {{"dest", path}});
    co_return co_await refuse(*stream, kind.error());
  }
  const nlohmann::json answer = {{"type", "stat"}, {"kind", *kind}};
  (void)co_await fs::write_control(*stream, answer);
  (void)co_await stream->close_write();
}

asio::awaitable<void> serve_send(std::shared_ptr<MuxStream> stream, ExecContext ctx, SendRequest req) {
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  std::vector<std::string>& paths = req.paths;
  auto refused = [&](const Error& why) -> asio::awaitable<void> {
    audit(ctx, req.kind, "refuse", why.what(), {{"paths", paths}});
    co_await refuse(*stream, why);
  };
  if (paths.empty() || paths.size() > kMaxPullPaths) co_return co_await refused(Error(errc::invalid_argument, "bad list of paths"));
  for (auto& p : paths) {
    p = without_trailing_slashes(std::move(p));
    if (auto parts = fs::split_relative_path(p); !parts) co_return co_await refused(parts.error());
  }
  // cp get: the single path's top entry travels under this name, without the folders above it.
  const bool rename = !req.rename_as.empty() && paths.size() == 1;
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.workspace, terms); });
  if (!ws) co_return co_await refuse(*stream, ws.error());
  auto root = fs::open_root(ws->path, false);
  if (!root) co_return co_await refuse(*stream, root.error());
  const std::string over = "this transfer is over the provider's " + size_text(terms.max_transfer_bytes) +
                           " limit (share --max-transfer)";
  std::vector<fs::PathRename> renames;
  // The scan hashes every file: off the io thread, and only once the sizes are known to fit.
  auto entries = co_await fs::offload([&]() -> Result<std::vector<fs::Entry>> {
    std::vector<fs::Entry> out;
    std::set<std::string> seen;
    const fs::IgnoreRules none;
    const fs::LinkLookup link_of = [&](const std::string& p) { return fs::link_target_at(root->get(), p); };
    std::uint64_t left = terms.max_transfer_bytes;
    for (const auto& p : paths) {
      // "PATH/" (cp get): a folder, reached through a symlink when PATH is one.
      auto source = resolve_named(root->get(), p, req.folder);
      if (!source) return source.error();
      if (source->empty()) return Error(errc::invalid_argument, "refused path '" + p + "': it is the workspace itself");
      if (req.folder && kind_at(root->get(), *source) != "dir")
        return Error(errc::invalid_argument, "'" + p + "/' is not a folder");
      const std::string wire = rename ? req.rename_as : p;
      // Parents first, so the receiver creates them as folders (a pull keeps the path as named).
      for (std::size_t at = wire.find('/'); at != std::string::npos; at = wire.find('/', at + 1)) {
        std::string parent = wire.substr(0, at);
        if (seen.insert(parent).second) out.push_back({parent, fs::EntryType::dir, 0, false, "", ""});
      }
      auto found = fs::scan_tree(root->get(), *source, none, nullptr, left);
      if (!found) return found.error().code == errc::too_large ? Error(errc::too_large, over) : found.error();
      if (!found->empty() && found->front().type == fs::EntryType::link) {
        const std::string& target = found->front().target;
        if (!fs::symlink_resolves_inside(*source, target, link_of))
          return Error(errc::refused, "refused path '" + p + "': it is a symlink that leads outside the workspace");
        if (!fs::symlink_stays_inside(wire, target))  // e.g. sub/cur -> ../runs/42, sent as cur
          return Error(errc::invalid_argument, "'" + p + "' is a symlink to '" + target.substr(0, 200) +
                                                   "', which would point outside the destination: copy '" + p +
                                                   "/' (what it points to) instead");
      }
      if (wire != *source) renames.push_back({wire, *source});
      for (auto& e : *found) {
        if (e.type == fs::EntryType::file) left -= std::min(left, e.size);
        e.path = wire + e.path.substr(source->size());
        // Where it arrives, a symlink must still point inside (the receiver checks it again).
        if (e.type == fs::EntryType::link && !fs::symlink_stays_inside(e.path, e.target)) continue;
        if (seen.insert(e.path).second) out.push_back(std::move(e));
      }
    }
    return out;
  });
  if (!entries) co_return co_await refused(entries.error());
  const fs::Progress no_progress;
  const fs::SendLimit limit{terms.max_transfer_bytes, over};
  auto stats = co_await fs::send_tree(*stream, root->get(), *entries, no_progress, std::move(renames), nullptr, limit);
  if (!stats) {
    spdlog::info("session {}: send failed: {}", ctx.session_id, stats.error().what());
    audit(ctx, req.kind, "refuse", stats.error().what(), {{"paths", paths}});
  } else {
    audit(ctx, req.kind, "accept", "", {{"paths", paths}, {"files", stats->files_sent}, {"bytes", stats->bytes}});
  }
  (void)co_await stream->close_write();
}

}  // namespace runsnack::exec
