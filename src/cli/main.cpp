// runsnack: share a GPU machine with one link. One subcommand per file in this folder.
#include "cli/command.hpp"
#include "cli/command_words.hpp"
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
  app.set_version_flag("--version", "runsnack 0.1.0");
  app.require_subcommand(1);
  app.footer(
      "State lives in $RUNSNACK_HOME (default $XDG_DATA_HOME/runsnack). Logs go to stderr; set\n"
      "RUNSNACK_LOG=debug for more. Run `runsnack COMMAND --help` for each command.");

  ExitStatus status;
  add_share_command(app, status);
  add_info_command(app, status);
  add_run_commands(app, status);
  add_forward_command(app, status);
  add_cuda_command(app, status);
  add_grant_commands(app, status);
  add_remote_command(app, status);
  add_gpus_command(app, status);
  add_id_command(app, status);
  add_rendezvous_command(app, status);
  add_pool_command(app, status);
  add_cuda_server_command(app, status);

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
