#pragma once
// Man pages generated from the CLI's own definitions (cli_spec.hpp):
// runsnack(1), an overview with the environment and files, and one page per
// command, runsnack-COMMAND(1), with its options and subcommands.

#include "cli/cli_spec.hpp"

#include <string>
#include <utility>
#include <vector>

namespace runsnack::cli {

// (file name, roff text) for every page, e.g. {"runsnack-share.1", ".TH ..."}.
// `version`: e.g. "0.1.0", shown in each page's footer.
std::vector<std::pair<std::string, std::string>> man_pages(const CommandSpec& root, const std::string& version);

}  // namespace runsnack::cli
