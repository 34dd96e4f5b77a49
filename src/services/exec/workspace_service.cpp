#include "services/exec/workspace_service.hpp"

#include "core/clock.hpp"
#include "core/json_fields.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/run_terms.hpp"
#include "services/exec/service_replies.hpp"
#include "services/exec/workspace_transfer.hpp"
#include "sandbox/workspace_names.hpp"
#include "sandbox/workspace_projects.hpp"
#include "fs/offload.hpp"

namespace runsnack::exec {

namespace asio = boost::asio;

asio::awaitable<void> serve_workspaces(std::shared_ptr<MuxStream> stream, ExecContext ctx, nlohmann::json args) {
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  auto consumer_dir = workspace_for(ctx.consumer);
  if (!consumer_dir) co_return co_await refuse(*stream, consumer_dir.error());
  const std::string mode = string_or(args, "mode");
  if (mode == "remove") {
    auto name = checked_workspace_name(string_or(args, "name"));
    if (!name) co_return co_await refuse(*stream, name.error());
    auto removed = co_await fs::offload([&]() -> Result<void> {
      std::error_code ec;
      if (!std::filesystem::is_directory(*consumer_dir, ec))
        return fail(errc::not_found, "there is no workspace '" + *name + "' (runsnack workspaces LINK lists them)");
      // Its quota image mounted and an earlier version's files adopted, as for any use.
      auto folder = prepare_consumer_folder(ctx.consumer, terms);
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
  auto listed = co_await fs::offload([&]() -> Result<std::vector<WorkspaceSummary>> {
    std::error_code ec;
    if (!std::filesystem::is_directory(*consumer_dir, ec)) return std::vector<WorkspaceSummary>{};
    auto folder = prepare_consumer_folder(ctx.consumer, terms);
    if (!folder) return folder.error();
    return summarize_workspaces(folder->consumer_dir);
  });
  if (!listed) co_return co_await refuse(*stream, listed.error());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& w : *listed)
    list.push_back({{"name", w.name}, {"bytes", w.bytes},
                    {"last_used", rfc3339(from_unix(w.last_used_unix))}, {"in_use", w.in_use}});
  nlohmann::json answer = {{"type", "workspaces"}, {"workspaces", list}, {"quota_bytes", nullptr}};
  if (terms.disk_quota_bytes) answer["quota_bytes"] = *terms.disk_quota_bytes;
  (void)co_await fs::write_control(*stream, answer);
  (void)co_await stream->close_write();
}

}  // namespace runsnack::exec
