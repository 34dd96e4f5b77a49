#include "services/exec/workspace_transfer.hpp"

#include "core/json_fields.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/run_terms.hpp"
#include "services/exec/kept_sync_states.hpp"
#include "services/exec/service_replies.hpp"
#include "fs/offload.hpp"
#include "fs/path_rules.hpp"
#include "fs/read_bounds.hpp"
#include "fs/tree_scan.hpp"
#include "fs/transfer.hpp"

#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <memory>
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

// What the run sync keeps of its states in memory (kept_sync_states.hpp): a state of 16k entries
// with paths of ~50 bytes takes ~8 MiB; a larger one is loaded from disk for each sync.
constexpr std::size_t kKeptBytesPerConsumer = 16u << 20;
constexpr std::size_t kKeptBytesTotal = 64u << 20;
// A state unused this long is dropped: an edit-and-run loop comes back sooner; loading it again
// costs one read of the state (~19 ms for 16k entries).
constexpr std::chrono::seconds kKeptIdle{60};
// After a sync that changed a state of this many entries (or one not kept), the heap is trimmed.
constexpr std::size_t kTrimAfterEntries = 4096;

KeptSyncStates& kept_sync_states() {
  // Never destroyed: the release timer may still fire on offload_pool() while the process exits.
  static auto* states = new KeptSyncStates({kKeptBytesPerConsumer, kKeptBytesTotal, kKeptIdle});
  return *states;
}

// Hands the heap that freed states leave in the allocator's free lists back to the system. Off the
// io thread.
void trim_heap() { ::malloc_trim(0); }

// One timer at a time, on offload_pool() (off the io thread; the pool owns the wait): it fires when
// the least recently used kept state turns idle, drops what is idle by then, and waits for the
// next; none waits while nothing is kept.
void arm_idle_release() {
  static std::atomic<bool> armed{false};
  if (armed.exchange(true)) return;
  const auto at = kept_sync_states().next_idle();
  if (!at) {
    armed = false;
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(fs::offload_pool(), *at + std::chrono::milliseconds(100));
  timer->async_wait([timer](const boost::system::error_code& ec) {
    armed = false;
    if (ec) return;
    if (const std::size_t freed = kept_sync_states().release_idle(KeptSyncStates::Clock::now()); freed > 0) {
      trim_heap();
      spdlog::debug("released {} bytes of idle sync states", freed);
    }
    arm_idle_release();
  });
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

void forget_kept_sync_state(const std::filesystem::path& base) { kept_sync_states().drop(base.string()); }

asio::awaitable<void> serve_sync(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::string dest, bool whole) {
  const char* kind = whole ? "sync" : "cp_put";
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  dest = without_trailing_slashes(std::move(dest));
  if (!dest.empty())
    if (auto parts = fs::split_relative_path(dest); !parts) {
      audit(ctx, kind, "refuse", parts.error().what(), {{"dest", dest}});
      co_return co_await refuse(*stream, parts.error());
    }
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.grant.id, ctx.workspace, terms); });
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
  if (whole)
    state = co_await fs::offload(stream->peer_name(), [&] {
      auto kept = kept_sync_states().take(state_base.string());
      if (!kept) {
        kept = std::make_unique<fs::SyncState>();
        kept->load(state_base);
      }
      return kept;
    });
  fs::ReceiveLimits limits;
  limits.quota_bytes = terms.disk_quota_bytes;
  limits.write.owner = owner;
  // A project's symlinks arrive as they are (.venv/bin/python3 -> /usr/bin/python3): they resolve in
  // the sandbox. Nothing of ours follows one: writes walk with O_NOFOLLOW (safe_fs.hpp), a path the
  // consumer names is resolved inside (resolve_named), and a command could make them anyway.
  limits.links_may_point_outside = true;
  if (ws->quota_bytes) limits.write.full_message = quota_full_text(*ws->quota_bytes);
  const fs::Progress no_progress;
  auto stats = co_await fs::receive_tree(*stream, target->get(), limits, state.get(), no_progress);
  if (state && stats) {
    // Saved inside the consumer's folder (its quota image): a state that does not fit is not kept
    // on disk, and the next sync compares the workspace with what it is sent instead.
    const bool changed = !stats->unchanged;
    const bool saved = co_await fs::offload(stream->peer_name(), [&] {
      const bool ok = !changed || state->save(state_base);
      const std::size_t entries = state->entries.size();
      const bool kept = kept_sync_states().put_back(ctx.consumer.str(), state_base.string(), std::move(state),
                                                    KeptSyncStates::Clock::now());
      if (changed && (!kept || entries >= kTrimAfterEntries)) trim_heap();
      return ok;
    });
    arm_idle_release();
    if (!saved)
      spdlog::info("session {}: the sync state of workspace {} could not be saved (its quota is full?): the next "
                   "sync compares the whole workspace", ctx.session_id, ctx.workspace);
  } else if (state) {
    co_await fs::offload(stream->peer_name(), [&] { state.reset(); });  // consumer-sized: off the io thread
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
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.grant.id, ctx.workspace, terms); });
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
  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.grant.id, ctx.workspace, terms); });
  if (!ws) co_return co_await refuse(*stream, ws.error());
  auto root = fs::open_root(ws->path, false);
  if (!root) co_return co_await refuse(*stream, root.error());
  const std::string over = "this transfer is over the provider's " + size_text(terms.max_transfer_bytes) +
                           " limit (share --max-transfer)";
  std::vector<fs::PathRename> renames;
  // The scan hashes every file: off the io thread, as this consumer's work, only once the sizes are
  // known to fit, refusing files whose holes cannot be seen, and no longer than the consumer waits.
  const fs::ReadBounds bounds{stream->stop_token()};
  auto entries = co_await fs::offload(stream->peer_name(), [&]() -> Result<std::vector<fs::Entry>> {
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
      auto found = fs::scan_tree(root->get(), *source, none, nullptr, left, &bounds);
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
