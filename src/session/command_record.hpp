#pragma once
// What the provider keeps of each command it runs for a session, so that
// `runsnack sessions` can show and measure it (store/session_store.hpp): run,
// shell and cuda start a record when the sandbox is up and drop it when the
// command has ended. The provider supplies the recorder (its sessions table);
// without one (tests, the pool's worker) nothing is recorded. Part of the
// service contract (session/service.hpp).

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

namespace runsnack {

struct RunningCommand {
  std::string command;  // the consumer's command line (the recorder bounds it)
  pid_t pid = -1;       // the sandbox's outermost process (bwrap)
  std::string cgroup;   // its cgroup folder; empty under rlimits
};

// Removes its row when destroyed.
class CommandRecord {
 public:
  virtual ~CommandRecord() = default;
  // A re-attach from another session (detached_commands.hpp): the command is that session's now.
  virtual void moved_to(const std::string& session_id) = 0;
};

using CommandRecorder = std::function<std::shared_ptr<CommandRecord>(const RunningCommand&)>;

inline std::shared_ptr<CommandRecord> record_command(const CommandRecorder& recorder, RunningCommand command) {
  return recorder ? recorder(command) : nullptr;
}

}  // namespace runsnack
