#pragma once
// `runsnack run [LINK] -- CMD...` and `runsnack cuda [LINK] -- CMD...`: every word after the
// first `--` is the command, whatever it looks like. CLI11 alone fills positionals in order, so
// with LINK left out (RUNSNACK_LINK, README) the command's first word was taken for the link.
// The rule: after `--` is always CMD; before it, at most one positional word, the LINK. Without
// `--` the first positional word is the LINK and the rest the command, as before.

#include <optional>
#include <string>
#include <vector>

namespace runsnack::cli {

struct CommandWords {
  std::vector<std::string> for_parser;              // argv[1..] up to the first `--`
  std::optional<std::vector<std::string>> command;  // the words after it (run and cuda only)
};

// Splits only for the subcommands that run a command (`run`, `cuda`); others keep `--` for CLI11.
CommandWords split_command_words(int argc, const char* const* argv);

// Called by main before parsing; read by take_command.
void set_command_after_dashes(std::optional<std::vector<std::string>> words);

// For run and cuda callbacks: `command` becomes the words after `--` when there were any. Throws
// CLI::ValidationError (exit status 2, with `usage`) when there is no command, or when words
// other than LINK stand before `--`.
void take_command(std::vector<std::string>& command, const std::string& usage);

}  // namespace runsnack::cli
