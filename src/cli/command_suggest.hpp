#pragma once
// Manners for the top level: `runsnack help [COMMAND...]`, and "did you mean"
// for a command word that is not one (a typo such as `runsnack shar`).

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace runsnack::cli {

// The visible subcommand of `app` nearest to `word` (edit distance at most a
// third of its length, at least 1, or `word` a prefix of it), if any.
std::optional<std::string> nearest_command(const CLI::App& app, const std::string& word);

// Handles argv before CLI11 sees it: bare `runsnack` (help on stderr, exit 2),
// `runsnack help [CMD...]` (that help on stdout, exit 0) and an unknown first
// word (a one-line error with the nearest command, exit 2). nullopt: parse as usual.
std::optional<int> handle_top_level(CLI::App& app, const std::vector<std::string>& args);

}  // namespace runsnack::cli
