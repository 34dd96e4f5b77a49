#pragma once
// This installation's state, opened on demand by the commands that need it:
// the identity key, the SQLite database of grants and the audit log, and the
// saved remotes. All under state_dir() (RUNSNACK_HOME in tests).

#include "core/error.hpp"
#include "crypto/identity.hpp"
#include "store/database.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>

namespace runsnack::cli {

// The commands that manage this machine's links, which use the machine's
// state (/var/lib/runsnack) where the rule in core/paths.hpp allows.
inline constexpr const char* kMachineStateCommands[] = {"share", "links", "revoke", "log", "sessions", "kick"};

// Makes each of kMachineStateCommands select StateScope::machine before it runs.
void use_machine_state_for_link_commands(CLI::App& app);

Result<std::filesystem::path> state_path(const char* file);  // state_dir() / file
Result<Identity> open_identity();
Result<Database> open_database();  // runsnack.db, migrated

}  // namespace runsnack::cli
