#include "cli/workspace_arg.hpp"

#include "sandbox/workspace_names.hpp"

namespace runsnack::cli {

void add_workspace_option(CLI::App* cmd, std::string& into) {
  cmd->add_option("--workspace", into,
                  "Work in this workspace of yours on the provider (default: the one of this folder, named after it, "
                  "e.g. train-3f9a2c41; `runsnack workspaces LINK` lists them)");
}

Result<std::string> chosen_workspace(const std::string& option, const std::filesystem::path& folder) {
  if (!option.empty()) return exec::checked_workspace_name(option);
  return exec::project_workspace_name(std::filesystem::absolute(folder));
}

nlohmann::json in_workspace(nlohmann::json args, const std::string& workspace) {
  args["workspace"] = workspace;
  return args;
}

}  // namespace runsnack::cli
