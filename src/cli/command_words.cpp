#include "cli/command_words.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

namespace runsnack::cli {

namespace {
std::optional<std::vector<std::string>> g_after_dashes;
}  // namespace

CommandWords split_command_words(int argc, const char* const* argv) {
  CommandWords out;
  for (int i = 1; i < argc; ++i) out.for_parser.emplace_back(argv[i]);
  if (out.for_parser.empty() || (out.for_parser[0] != "run" && out.for_parser[0] != "cuda")) return out;
  auto dashes = std::find(out.for_parser.begin(), out.for_parser.end(), "--");
  if (dashes == out.for_parser.end()) return out;
  out.command.emplace(dashes + 1, out.for_parser.end());
  out.for_parser.erase(dashes, out.for_parser.end());
  return out;
}

void set_command_after_dashes(std::optional<std::vector<std::string>> words) { g_after_dashes = std::move(words); }

void take_command(std::vector<std::string>& command, const std::string& usage) {
  if (g_after_dashes) {
    if (!command.empty())
      throw CLI::ValidationError("CMD", "only LINK goes before --, the command after it ('" + command.front() +
                                            "' stands before --): " + usage);
    command = *g_after_dashes;
  }
  if (command.empty()) throw CLI::ValidationError("CMD", "no command given: " + usage);
}

}  // namespace runsnack::cli
