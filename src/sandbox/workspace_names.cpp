#include "sandbox/workspace_names.hpp"

#include "fs/safe_fs.hpp"

#include <nlohmann/json.hpp>

namespace runsnack::exec {

namespace sfs = std::filesystem;

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

}  // namespace

Result<std::string> checked_workspace_name(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxWorkspaceNameBytes && name.front() != '.' && name.front() != '-';
  for (char c : name) ok = ok && name_char(c);
  if (!ok)
    return fail(errc::invalid_argument, "bad workspace name '" + std::string(name.substr(0, 80)) +
                                            "': use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'");
  return std::string(name);
}

std::string project_workspace_name(const std::filesystem::path& folder) {
  sfs::path path = folder.lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "/a/b/" is "/a/b"
  const std::string full = path.string();
  std::string base;
  for (char c : path.filename().string())
    if (base.size() < 40) base += name_char(c) ? c : '_';
  while (!base.empty() && (base.front() == '.' || base.front() == '-')) base.erase(base.begin());
  if (base.empty()) base = "project";
  return base + "-" + fs::sha256_hex(full.data(), full.size()).substr(0, 8);
}

Result<std::string> workspace_name_in(const nlohmann::json& args) {
  if (!args.is_object() || !args.contains("workspace")) return std::string(kDefaultWorkspace);
  const auto& v = args["workspace"];
  if (!v.is_string()) return fail(errc::invalid_argument, "bad workspace name: expected a string");
  return checked_workspace_name(v.get_ref<const std::string&>());
}

}  // namespace runsnack::exec
