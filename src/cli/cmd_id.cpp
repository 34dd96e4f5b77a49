#include "cli/command.hpp"
#include "cli/state.hpp"
#include "core/paths.hpp"

#include <iostream>

namespace runsnack::cli {

void add_id_command(CLI::App& app, ExitStatus& status) {
  auto* cmd = app.add_subcommand("id", "Print this installation's PeerId (creates the identity key on first use)");
  cmd->footer(
      "The PeerId is the SHA-256 of this installation's Ed25519 public key, in base32. Links to\n"
      "this machine pin it, so nobody else can pose as it. The key is kept in the state directory\n"
      "($RUNSNACK_HOME, else $XDG_DATA_HOME/runsnack) with mode 0600.");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print {\"peer_id\":...,\"state_dir\":...}");
  cmd->callback([&status, json] {
    run_command(status, [&] {
      auto id = open_identity();
      if (!id) return report(id.error());
      if (*json) {
        print_json({{"peer_id", id->peer_id().str()}, {"state_dir", state_dir().value().string()}});
      } else {
        std::cout << id->peer_id().str() << std::endl;
      }
      return 0;
    });
  });
}

}  // namespace runsnack::cli
