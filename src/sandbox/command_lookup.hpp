#pragma once
// Whether a run's command exists in the sandbox, looked up before launching it,
// so that a typo ends with a shell's exit status (127 not found, 126 not
// executable) and one line saying so, instead of bwrap's "execvp" error and 1.
//
// The sandbox sees the host's system folders (/usr, /bin, /sbin, /lib*, /etc,
// /opt) at the same paths and the workspace at kWorkspaceMount; a command is
// looked up as execvp would there: by PATH when it has no '/', else as a path
// (relative to the workspace). Where the answer is not certain (another
// folder, a symlink in the workspace, a folder hidden in the sandbox) the
// answer is `unknown` and the command is launched as before.

#include <filesystem>
#include <string>
#include <vector>

namespace runsnack::exec {

// The sandbox's PATH unless the consumer sets one (sandbox.cpp).
inline constexpr const char* kSandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

enum class CommandLookup { found, not_found, not_executable, unknown };

// `hidden`: host folders the sandbox covers with an empty tmpfs.
CommandLookup lookup_command(const std::string& command, const std::filesystem::path& workspace,
                             const std::string& path_env, const std::vector<std::filesystem::path>& hidden = {});

// The exit status a shell gives for `lookup` (127, 126), 0 for found or unknown.
int lookup_exit_status(CommandLookup lookup);

}  // namespace runsnack::exec
