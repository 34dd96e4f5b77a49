#pragma once
// A consumer's workspaces on this provider (workspace_names.hpp says how one
// is chosen): <state>/workspaces/<consumer>/<name>, each bound as
// /workspace for its commands. The quota's image is mounted on the
// consumer's folder (launch.hpp), so the disk quota holds for all of a
// consumer's workspaces together.
//
// The folder of a consumer made by an earlier version held one workspace's
// files directly: they move into the workspace "default" (which is where a
// consumer that names none works) the first time the folder is used.
//
// Removal: refused while a command runs in that workspace; otherwise the
// folder is renamed out of reach first and then deleted through
// descriptors, no symlink followed, so that nothing a command left in it
// can turn the provider's delete toward another path.

#include "core/error.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace runsnack::exec {

// Moves an earlier version's files into "default" and marks the folder as holding workspaces.
Result<void> adopt_workspaces_folder(const std::filesystem::path& consumer_dir);
// The names of the workspaces in `consumer_dir`.
std::vector<std::string> workspace_names_in(const std::filesystem::path& consumer_dir);

// Where the run sync of workspace `name` keeps its state (fs::SyncState's base):
// <consumer_dir>/.runsnack-sync/<name>, inside the consumer's folder and so inside its quota image
// where there is one: the state takes the consumer's room, not the host's. No command sees it (its
// /workspace is <consumer_dir>/<name>, and a workspace name cannot start with a dot).
std::filesystem::path sync_state_base(const std::filesystem::path& consumer_dir, const std::string& name);
// Deletes the sync states an earlier version kept beside the consumer's folder, outside its image
// (<consumer_dir>.sync[.<name>].manifest/.hashes), once per consumer and process. `consumer_dir`: the
// folder as the host sees it (launch.hpp workspace_for).
void remove_earlier_sync_states(const std::filesystem::path& consumer_dir);

// Commands running in a workspace: one use each, for as long as it runs (detached ones too).
class WorkspaceUses {
 public:
  using Use = std::shared_ptr<void>;
  static Use begin(const std::filesystem::path& workspace);
  static bool busy(const std::filesystem::path& workspace);
};

struct WorkspaceSummary {
  std::string name;
  std::uint64_t bytes = 0;         // disk it takes (allocated blocks), its sync state's included
  std::int64_t last_used_unix = 0;  // the last run, shell, sync or cp in it
  bool in_use = false;             // a command runs in it
};
std::vector<WorkspaceSummary> summarize_workspaces(const std::filesystem::path& consumer_dir);
// Marks workspace `dir` used now (what summarize_workspaces reports as last use).
void touch_workspace(const std::filesystem::path& dir);

// Deletes workspace `name` and its sync state. errc::not_found when there is none, errc::refused when
// a command runs in it.
Result<void> remove_workspace(const std::filesystem::path& consumer_dir, const std::string& name);

}  // namespace runsnack::exec
