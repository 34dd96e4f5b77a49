#pragma once
// What a command left changed in its workspace, for the consumer's closing line "3 files changed in
// the remote workspace (...)" when it pulls nothing (cli/cmd_run.cpp): every entry but a folder
// whose inode changed (ctime) after the command started; files the sync wrote before it do not
// count, and deletions are not seen.
//
// The walk follows no symlink: each folder is opened O_NOFOLLOW from its parent's descriptor, so a
// command that swaps a folder for a symlink cannot lead it outside the workspace. It stops after
// `max_entries` entries (then `complete` is false and `files` a lower bound), so a workspace of a
// million files costs a bounded walk, not seconds. Blocking: call it off the io thread (fs::offload).

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

namespace runsnack::exec {

inline constexpr std::size_t kChangeScanEntries = 100'000;
inline constexpr std::size_t kChangedPathsNamed = 20;
inline constexpr std::size_t kChangedPathBytes = 256;  // longer paths are counted, not named

struct WorkspaceChanges {
  std::uint64_t files = 0;         // changed entries seen
  std::vector<std::string> paths;  // at most max_named of them, workspace-relative, sorted
  bool complete = true;            // false: the walk stopped at max_entries
};

// The time to pass as `since`: now, on the clock file times come from.
timespec change_clock_now();

WorkspaceChanges changes_since(const std::filesystem::path& workspace, const timespec& since,
                               std::size_t max_entries = kChangeScanEntries, std::size_t max_named = kChangedPathsNamed);

// {"files":N,"paths":[...],"complete":true}: the "changed" field of run's exit message (exec_service.hpp).
nlohmann::json to_json(const WorkspaceChanges& changes);

}  // namespace runsnack::exec
