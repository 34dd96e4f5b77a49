#pragma once
// Where this installation keeps its state.
//
// A user's own state: $RUNSNACK_HOME when set (tests use it), else
// $XDG_DATA_HOME/runsnack, else ~/.local/share/runsnack; created 0700.
//
// The machine's state (a packaged install, debian/): kMachineStateDir, owned
// by the `runsnack` system user, group `runsnack`, mode 3770, served by
// runsnack-share.service. The commands that manage this machine's links
// (share, links, revoke, log) select StateScope::machine; they then work in
// the machine's state when all of these hold:
//   - RUNSNACK_HOME is unset or empty (setting it always wins),
//   - kMachineStateDir exists,
//   - this user may write it (root, the runsnack user, members of group runsnack).
// Every other command, and these when a condition fails, use the user's own
// state. In the machine's state, files that members of the group share (the
// grants database) get mode 0660 instead of 0600 (shared_file_mode()); the
// identity key stays 0600, readable only by the service's user.

#include "core/error.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace runsnack {

inline constexpr const char* kMachineStateDir = "/var/lib/runsnack";

enum class StateScope { user, machine };

// Why state_dir() is where it is.
enum class StateSource {
  runsnack_home,  // $RUNSNACK_HOME
  machine,        // the machine's state, chosen by the rule above
  xdg,            // $XDG_DATA_HOME/runsnack
  home,           // ~/.local/share/runsnack
};

// The inputs of the rule, so that it is tested without touching the real
// environment or /var/lib.
struct StateEnvironment {
  std::optional<std::string> runsnack_home, xdg_data_home, home;
  bool machine_dir_usable = false;  // kMachineStateDir exists and this user may write it
  static StateEnvironment current(const std::filesystem::path& machine_dir = kMachineStateDir);
};

struct StateChoice {
  std::filesystem::path dir;
  StateSource source = StateSource::home;
};

// The rule itself (pure). Fails when nothing names a folder (no HOME).
Result<StateChoice> choose_state_dir(StateScope scope, const StateEnvironment& env,
                                     const std::filesystem::path& machine_dir = kMachineStateDir);

// Chooses the scope for the rest of this process (default: user). The CLI
// calls it before a command runs; call it before the first state_dir().
void select_state_scope(StateScope scope);

// The chosen folder, created on first use (0700 unless it is the machine's).
Result<std::filesystem::path> state_dir();
StateSource state_source();  // of the current choice (state_dir() need not have been called)
// Whether state_dir() is the machine's state folder, however it was chosen
// (the services set RUNSNACK_HOME=/var/lib/runsnack explicitly).
bool state_is_machine_wide();
// 0600 in a user's state; 0660 in the machine's (group runsnack shares it).
unsigned shared_file_mode();

// Writes `contents` to `path` atomically (temp file + rename) with `mode`.
Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view contents, unsigned mode);
Result<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace runsnack
