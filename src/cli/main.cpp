// runsnack: share a GPU machine with one link. One subcommand per file in this folder.
#include "cli/command.hpp"
#include "cli/command_suggest.hpp"
#include "cli/command_words.hpp"
#include "cli/state.hpp"
#include "core/log.hpp"

#include <algorithm>
#include <csignal>

int main(int argc, char** argv) {
  using namespace runsnack::cli;
  runsnack::init_logging();
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{
      "RunSnack: share a GPU machine with one link (peer-to-peer, end-to-end encrypted, no accounts).\n"
      "Provider: `runsnack share` prints a link. Consumer: `runsnack info LINK` and friends use it.",
      "runsnack"};
  app.set_version_flag("--version", std::string("runsnack ") + kVersion);
  app.require_subcommand(1);
  app.footer(
      "State lives in $RUNSNACK_HOME (default $XDG_DATA_HOME/runsnack); with the Debian package, share,\n"
      "links, revoke, log, sessions and kick use /var/lib/runsnack for root and group runsnack (docs/INSTALL.md). Logs go\n"
      "to stderr; set RUNSNACK_LOG=debug for more. `runsnack doctor` checks this machine. Run\n"
      "`runsnack help COMMAND` (or `runsnack COMMAND --help`) for each command.");

  ExitStatus status;
  add_share_command(app, status);
  add_info_command(app, status);
  add_run_commands(app, status);
  add_workspaces_command(app, status);
  add_forward_command(app, status);
  add_cuda_command(app, status);
  add_grant_commands(app, status);
  add_session_commands(app, status);
  add_remote_command(app, status);
  add_gpus_command(app, status);
  add_id_command(app, status);
  add_rendezvous_command(app, status);
  add_pool_command(app, status);
  add_cuda_server_command(app, status);
  add_doctor_command(app, status);
  add_generate_command(app, status);
  use_machine_state_for_link_commands(app);

  if (auto handled = handle_top_level(app, std::vector<std::string>(argv + 1, argv + argc))) return *handled;
  try {
    auto words = split_command_words(argc, argv);
    set_command_after_dashes(std::move(words.command));
    std::reverse(words.for_parser.begin(), words.for_parser.end());  // CLI11 takes them last first
    app.parse(words.for_parser);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  return status.code;
}
