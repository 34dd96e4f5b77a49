#pragma once
// Which of a consumer's workspaces a run, shell or cp works in. A consumer
// has one workspace per local project (so that a sync of one folder never
// deletes another's files): by default the project is the folder `run`
// syncs (or the current folder, for shell and cp), named after it with a
// hash of its absolute path; `--workspace NAME` picks one by name. The name
// travels in each stream's arguments ("workspace"); a consumer that sends
// none (older versions) works in "default", where the files of the single
// workspace of earlier versions are kept.

#include "core/error.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace runsnack::exec {

inline constexpr std::string_view kDefaultWorkspace = "default";
inline constexpr std::size_t kMaxWorkspaceNameBytes = 64;
// A consumer's workspaces on one provider: each costs a folder and a sync state; the disk quota
// bounds their bytes together.
inline constexpr std::size_t kMaxWorkspacesPerConsumer = 100;

// `name` when it is one: 1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.' or '-'.
Result<std::string> checked_workspace_name(std::string_view name);
// The default workspace of the project in `folder` (an absolute path): its last component, made
// a name, and 8 hex digits of the path's SHA-256, e.g. "train-3f9a2c41".
std::string project_workspace_name(const std::filesystem::path& folder);
// The workspace a stream's arguments name, kDefaultWorkspace when they name none.
Result<std::string> workspace_name_in(const nlohmann::json& args);

}  // namespace runsnack::exec
