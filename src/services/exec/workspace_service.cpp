#include "services/exec/workspace_service.hpp"

#include "core/clock.hpp"
#include "core/json_fields.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/run_terms.hpp"
#include "services/exec/service_replies.hpp"
#include "services/exec/workspace_transfer.hpp"
#include "sandbox/workspace_names.hpp"
#include "sandbox/workspace_image.hpp"
#include "sandbox/workspace_projects.hpp"
#include "fs/offload.hpp"

namespace runsnack::exec {

namespace asio = boost::asio;

asio::awaitable<void> serve_workspaces(std::shared_ptr<MuxStream> stream, ExecContext ctx, nlohmann::json args) {
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  const std::string mode = string_or(args, "mode");
  if (mode == "remove") {
    auto name = checked_workspace_name(string_or(args, "name"));
    if (!name) co_return co_await refuse(*stream, name.error());
    auto removed = co_await fs::offload(stream->peer_name(), [&]() -> Result<void> {
      if (!has_consumer_folder(ctx.consumer, ctx.grant.id, terms))
        return fail(errc::not_found, "there is no workspace '" + *name + "' (runsnack workspaces LINK lists them)");
      // Its quota image mounted and an earlier version's files adopted, as for any use; over
      // the quota (no image holds the files), the files as they are: removing is the way back.
      auto folder = prepare_consumer_folder(ctx.consumer, ctx.grant.id, terms, true, true);
      if (!folder) return folder.error();
      auto removed = remove_workspace(folder->consumer_dir, *name);
      if (removed) forget_kept_sync_state(sync_state_base(folder->consumer_dir, *name));
      return removed;
    });
    audit_event(ctx, "workspace_remove", removed ? "accept" : "refuse", removed ? "" : removed.error().what(),
                {{"name", *name}});
    if (!removed) co_return co_await refuse(*stream, removed.error());
    const nlohmann::json answer = {{"type", "removed"}, {"name", *name}};
    (void)co_await fs::write_control(*stream, answer);
    (void)co_await stream->close_write();
    co_return;
  }
  struct Listed {
    std::vector<WorkspaceSummary> workspaces;
    std::uint64_t quota_used = 0;  // by everyone under the link's quota
  };
  // Walks of the consumer's folder and the link's: this consumer's work, in turn with others' (offload_queue.hpp).
  auto listed = co_await fs::offload(stream->peer_name(), [&]() -> Result<Listed> {
    if (!has_consumer_folder(ctx.consumer, ctx.grant.id, terms)) return Listed{};
    auto folder = prepare_consumer_folder(ctx.consumer, ctx.grant.id, terms, false, true);
    if (!folder) return folder.error();
    std::error_code ec;
    Listed out;
    if (std::filesystem::is_directory(folder->consumer_dir, ec)) out.workspaces = summarize_workspaces(folder->consumer_dir);
    // The quota's use is a walk bounded by the quota; a folder with no quota is not measured.
    if (terms.disk_quota_bytes) out.quota_used = allocated_bytes(folder->quota_dir);
    return out;
  });
  if (!listed) co_return co_await refuse(*stream, listed.error());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& w : listed->workspaces)
    list.push_back({{"name", w.name}, {"bytes", w.bytes},
                    {"last_used", rfc3339(from_unix(w.last_used_unix))}, {"in_use", w.in_use}});
  // The quota is the link's: what everyone who uses it has filled, not only this consumer.
  nlohmann::json answer = {{"type", "workspaces"}, {"workspaces", list}, {"quota_bytes", nullptr},
                           {"quota_used_bytes", nullptr}};
  if (terms.disk_quota_bytes) {
    answer["quota_bytes"] = *terms.disk_quota_bytes;
    answer["quota_used_bytes"] = listed->quota_used;
  }
  (void)co_await fs::write_control(*stream, answer);
  (void)co_await stream->close_write();
}

}  // namespace runsnack::exec
