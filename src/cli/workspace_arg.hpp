#pragma once
// --workspace NAME of run, shell and cp, and the workspace they use without
// it: the one of this project folder (sandbox/workspace_names.hpp).

#include "core/error.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace runsnack::cli {

// Adds --workspace to `cmd`, stored in `into`.
void add_workspace_option(CLI::App* cmd, std::string& into);
// `option` when given (checked), else the name of the project in `folder`.
Result<std::string> chosen_workspace(const std::string& option, const std::filesystem::path& folder);
// A stream's arguments with the workspace named.
nlohmann::json in_workspace(nlohmann::json args, const std::string& workspace);

}  // namespace runsnack::cli
