#include "cli/command.hpp"

namespace runsnack::cli {

void add_forward_command(CLI::App&, ExitStatus&) {}

}  // namespace runsnack::cli
