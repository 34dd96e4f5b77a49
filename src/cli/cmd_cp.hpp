#pragma once
// `runsnack cp` (cmd_cp.cpp), registered by add_run_commands (cmd_run.cpp) after run and shell.
#include "cli/command.hpp"

namespace runsnack::cli {

void add_cp_command(CLI::App& app, ExitStatus& status);

}  // namespace runsnack::cli
