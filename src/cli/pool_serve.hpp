#pragma once
// `runsnack pool serve` (cmd_pool_serve.cpp); the other pool commands are in cmd_pool.cpp.

#include "cli/command.hpp"

#include <CLI/CLI.hpp>

namespace runsnack::cli {

void add_pool_serve_command(CLI::App& pool, ExitStatus& status);

}  // namespace runsnack::cli
