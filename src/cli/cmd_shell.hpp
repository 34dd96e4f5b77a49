#pragma once
// `runsnack shell` (cmd_shell.cpp), registered by add_run_commands (cmd_run.cpp).

#include "cli/command.hpp"

namespace runsnack::cli {

void add_shell_command(CLI::App& app, ExitStatus& status);

}  // namespace runsnack::cli
