#include "cli/state.hpp"

#include "core/paths.hpp"

namespace runsnack::cli {

void use_machine_state_for_link_commands(CLI::App& app) {
  for (const char* name : kMachineStateCommands)
    app.get_subcommand(name)->preparse_callback([](std::size_t) { select_state_scope(StateScope::machine); });
}

Result<std::filesystem::path> state_path(const char* file) {
  auto dir = state_dir();
  if (!dir) return dir.error();
  return *dir / file;
}

Result<Identity> open_identity() {
  auto dir = state_dir();
  if (!dir) return dir.error();
  return Identity::load_or_create(*dir);
}

Result<Database> open_database() {
  auto path = state_path("runsnack.db");
  if (!path) return path.error();
  return Database::open(*path);
}

}  // namespace runsnack::cli
