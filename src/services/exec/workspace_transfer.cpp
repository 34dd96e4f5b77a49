#include "services/exec/workspace_transfer.hpp"

#include "core/json_fields.hpp"
#include "services/exec/launch.hpp"
#include "services/exec/run_terms.hpp"
#include "services/exec/service_replies.hpp"
#include "services/fs/offload.hpp"
#include "services/fs/path_rules.hpp"
#include "services/fs/transfer.hpp"

#include <spdlog/spdlog.h>

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

}  // namespace

asio::awaitable<void> serve_sync(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::string dest, bool whole) {
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, terms); });
  if (!ws) co_return co_await refuse(*stream, ws.error());
  if (!dest.empty())
    if (auto parts = fs::split_relative_path(dest); !parts) co_return co_await refuse(*stream, parts.error());
  const std::optional<fs::Owner> owner = owner_of(*ws);
  auto root = fs::open_root(ws->path, false);
  if (!root) co_return co_await refuse(*stream, root.error());
  auto target = fs::open_dir(root->get(), dest, true, owner ? &*owner : nullptr);
  if (!target) co_return co_await refuse(*stream, target.error());
  // The run sync keeps a SyncState (fast no-change answer, deletions); cp does not.
  const sfs::path state_base = ws->path.parent_path() / (ctx.consumer.str() + ".sync");
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
    audit(ctx, "sync", "refuse", stats.error().what(), {{"dest", dest}});
    (void)co_await stream->close_write();
    co_return;
  }
  audit(ctx, "sync", "accept", "", {{"dest", dest}, {"entries", stats->entries}, {"files", stats->files_sent},
                                     {"bytes", stats->bytes}, {"deleted", stats->deleted}});
  (void)co_await stream->close_write();
}

asio::awaitable<void> serve_send(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::vector<std::string> paths,
                                 std::string rename_as, std::string kind) {
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  if (paths.empty() || paths.size() > kMaxPullPaths) {
    const Error why(errc::invalid_argument, "bad list of paths");
    co_return co_await refuse(*stream, why);
  }
  for (const auto& p : paths)
    if (auto parts = fs::split_relative_path(p); !parts) co_return co_await refuse(*stream, parts.error());
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, terms); });
  if (!ws) co_return co_await refuse(*stream, ws.error());
  auto root = fs::open_root(ws->path, false);
  if (!root) co_return co_await refuse(*stream, root.error());
  const std::string over = "this transfer is over the provider's " + size_text(terms.max_transfer_bytes) +
                           " limit (share --max-transfer)";
  // The scan hashes every file: off the io thread, and only once the sizes are known to fit.
  auto entries = co_await fs::offload([&]() -> Result<std::vector<fs::Entry>> {
    std::vector<fs::Entry> out;
    std::set<std::string> seen;
    const fs::IgnoreRules none;
    std::uint64_t left = terms.max_transfer_bytes;
    for (const auto& p : paths) {
      // Parents first, so the receiver creates them as folders.
      for (std::size_t at = p.find('/'); at != std::string::npos; at = p.find('/', at + 1)) {
        std::string parent = p.substr(0, at);
        if (seen.insert(parent).second) out.push_back({parent, fs::EntryType::dir, 0, false, "", ""});
      }
      auto found = fs::scan_tree(root->get(), p, none, nullptr, left);
      if (!found) return found.error().code == errc::too_large ? Error(errc::too_large, over) : found.error();
      for (auto& e : *found) {
        if (e.type == fs::EntryType::file) left -= std::min(left, e.size);
        if (e.type == fs::EntryType::link && !fs::symlink_stays_inside(e.path, e.target)) continue;
        if (seen.insert(e.path).second) out.push_back(std::move(e));
      }
    }
    return out;
  });
  if (!entries) {
    audit(ctx, kind, "refuse", entries.error().what(), {{"paths", paths}});
    co_return co_await refuse(*stream, entries.error());
  }
  std::optional<fs::TopRename> rename;
  if (!rename_as.empty() && paths.size() == 1 && paths[0].find('/') == std::string::npos) {
    rename = fs::TopRename{rename_as, paths[0]};
    for (auto& e : *entries) e.path = paths[0] == e.path ? rename_as : rename_as + e.path.substr(paths[0].size());
  }
  const fs::Progress no_progress;
  const fs::SendLimit limit{terms.max_transfer_bytes, over};
  auto stats = co_await fs::send_tree(*stream, root->get(), *entries, no_progress, rename, nullptr, limit);
  if (!stats) {
    spdlog::info("session {}: send failed: {}", ctx.session_id, stats.error().what());
    audit(ctx, kind, "refuse", stats.error().what(), {{"paths", paths}});
  } else {
    audit(ctx, kind, "accept", "", {{"paths", paths}, {"files", stats->files_sent}, {"bytes", stats->bytes}});
  }
  (void)co_await stream->close_write();
}

}  // namespace runsnack::exec
