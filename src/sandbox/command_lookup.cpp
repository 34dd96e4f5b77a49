#include "sandbox/command_lookup.hpp"

#include "sandbox/sandbox.hpp"

#include <sys/stat.h>

#include <cerrno>

namespace runsnack::exec {

namespace {

namespace sfs = std::filesystem;

bool under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// The host path the sandbox shows at `inside` (absolute, normalised), or empty when not certain.
sfs::path host_path(const std::string& inside, const sfs::path& workspace, const std::vector<sfs::path>& hidden) {
  if (inside.find("/../") != std::string::npos || inside.ends_with("/..")) return {};
  if (under(inside, kWorkspaceMount)) return workspace / inside.substr(std::string(kWorkspaceMount).size()).insert(0, ".");
  for (const char* dir : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}) {
    if (!under(inside, dir)) continue;
    for (const auto& h : hidden)
      if (under(inside, h.string()) || under(h.string(), inside)) return {};
    return sfs::path(inside);
  }
  return {};
}

// One candidate file, as execve would take it.
CommandLookup check_file(const sfs::path& host, bool in_workspace) {
  struct stat st {};
  if (in_workspace) {
    // The workspace's symlinks may point at sandbox paths the host does not have.
    if (::lstat(host.c_str(), &st) != 0) {
      struct stat parent {};
      bool certain = errno == ENOENT && ::lstat(host.parent_path().c_str(), &parent) == 0 && S_ISDIR(parent.st_mode);
      return certain ? CommandLookup::not_found : CommandLookup::unknown;
    }
    if (S_ISLNK(st.st_mode)) return CommandLookup::unknown;
  } else if (::stat(host.c_str(), &st) != 0) {
    return errno == ENOENT || errno == ENOTDIR ? CommandLookup::not_found : CommandLookup::unknown;
  }
  if (S_ISREG(st.st_mode) && (st.st_mode & 0111)) return CommandLookup::found;
  return CommandLookup::not_executable;  // a folder, a device, or no x bit: execve says EACCES
}

}  // namespace

CommandLookup lookup_command(const std::string& command, const sfs::path& workspace, const std::string& path_env,
                             const std::vector<sfs::path>& hidden) {
  if (command.empty()) return CommandLookup::not_found;
  if (command.find('/') != std::string::npos) {
    std::string inside = command.front() == '/' ? command : std::string(kWorkspaceMount) + "/" + command;
    sfs::path host = host_path(inside, workspace, hidden);
    if (host.empty()) return CommandLookup::unknown;
    return check_file(host, under(inside, kWorkspaceMount));
  }
  // execvp: the first executable match wins; a match without x only counts when nothing else matches.
  bool saw_unexecutable = false;
  std::size_t start = 0;
  while (start <= path_env.size()) {
    std::size_t colon = path_env.find(':', start);
    if (colon == std::string::npos) colon = path_env.size();
    std::string dir = path_env.substr(start, colon - start);
    start = colon + 1;
    if (dir.empty() || dir.front() != '/') return CommandLookup::unknown;  // the working folder, relative entries
    std::string inside = dir + (dir.back() == '/' ? "" : "/") + command;
    sfs::path host = host_path(inside, workspace, hidden);
    if (host.empty()) return CommandLookup::unknown;
    switch (check_file(host, under(inside, kWorkspaceMount))) {
      case CommandLookup::found: return CommandLookup::found;
      case CommandLookup::unknown: return CommandLookup::unknown;
      case CommandLookup::not_executable: saw_unexecutable = true; break;
      case CommandLookup::not_found: break;
    }
  }
  return saw_unexecutable ? CommandLookup::not_executable : CommandLookup::not_found;
}

int lookup_exit_status(CommandLookup lookup) {
  switch (lookup) {
    case CommandLookup::not_found: return 127;
    case CommandLookup::not_executable: return 126;
    default: return 0;
  }
}

}  // namespace runsnack::exec
