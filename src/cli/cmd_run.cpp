#include "cli/command.hpp"

namespace runsnack::cli {

void add_run_commands(CLI::App&, ExitStatus&) {}

}  // namespace runsnack::cli
