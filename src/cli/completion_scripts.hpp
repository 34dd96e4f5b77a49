#pragma once
// Shell completion scripts for bash, zsh and fish, generated from the CLI's
// own definitions (cli_spec.hpp): subcommands at every level, each command's
// options (and whether they take a value), and plain file completion for
// arguments and after `--` (the remote command of `run`, `cuda`, ...).
// `runsnack __generate completion SHELL` prints one; the build writes all
// three (docs/INSTALL.md says where each shell looks for them).

#include "cli/cli_spec.hpp"

#include <string>

namespace runsnack::cli {

std::string bash_completion(const CommandSpec& root);
std::string zsh_completion(const CommandSpec& root);
std::string fish_completion(const CommandSpec& root);

}  // namespace runsnack::cli
