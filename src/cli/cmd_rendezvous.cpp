#include "cli/command.hpp"

namespace runsnack::cli {

void add_rendezvous_command(CLI::App&, ExitStatus&) {}

}  // namespace runsnack::cli
