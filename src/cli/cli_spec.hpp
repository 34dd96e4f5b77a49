#pragma once
// A plain description of the command-line interface, read from the CLI11
// definitions (the same objects that parse arguments), so that shell
// completions and man pages are generated from what the binary accepts
// (completion_scripts.hpp, man_pages.hpp). Hidden commands and options (CLI11
// group "") are left out.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace runsnack::cli {

struct OptionSpec {
  std::vector<std::string> names;  // "-h", "--help": short names first
  bool takes_value = false;        // false: a flag
  std::string value_name;          // e.g. "TEXT", "INT"; "" for a flag
  std::string help;
};

struct PositionalSpec {
  std::string name;  // e.g. "LINK"
  std::string help;
  bool required = false;
  bool repeated = false;  // takes several values
};

struct CommandSpec {
  std::string name;  // "runsnack", "share", "serve", ...
  std::string help;
  std::string footer;
  std::vector<OptionSpec> options;
  std::vector<PositionalSpec> positionals;
  std::vector<CommandSpec> subcommands;
};

CommandSpec describe(const CLI::App& app);

// Command words from the root to `command`, e.g. {"runsnack", "pool", "serve"}, for every
// command in the tree (root first, depth first).
struct CommandPath {
  std::vector<std::string> words;
  const CommandSpec* command = nullptr;
  std::string joined(const char* separator = " ") const;
};
std::vector<CommandPath> all_commands(const CommandSpec& root);

}  // namespace runsnack::cli
