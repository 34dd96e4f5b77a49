#pragma once
// The provider's live sessions, one row each in the `sessions` table, so that
// other processes on the machine can see them (`runsnack links`, `runsnack
// sessions`) and end one (`runsnack kick`): the provider inserts a row when
// it admits a session, deletes it when the session ends, and ends the
// sessions whose row was marked kicked (its watch loop, like revocation).
//
// Several `runsnack share` processes may serve one database; each row names
// its process (`pid`). Rows of a process that no longer runs (a crash, a
// kill -9) are left-overs: live() leaves them out and prune_dead() deletes them.
//
// Each session's running commands (run, shell, cuda servers) have a row of
// their own in `session_commands`, from start to end, so that `runsnack
// sessions` can measure them: at most kMaxSessionCommands per session (a
// consumer may start many; further ones are only counted), the command line
// cut to kMaxCommandText bytes (the consumer chose it: print it through
// core/printable).
//
// Ownership and threads: as GrantStore (borrows its Database; one thread).

#include "core/clock.hpp"
#include "core/error.hpp"
#include "store/database.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runsnack {

struct CommandRow {
  std::int64_t id = 0;
  std::string session_id;
  std::string command;    // at most kMaxCommandText bytes (add_command cuts it)
  TimePoint started{};
  std::int64_t pid = 0;   // the sandbox's outermost process (bwrap)
  std::string cgroup;     // its cgroup folder; empty under rlimits
  std::int64_t provider_pid = 0;
};

struct SessionRow {
  std::string id;
  std::string grant_id;
  std::string peer;      // the consumer's PeerId
  std::string address;   // host:port it came from
  std::string path;      // direct, punched, relayed
  std::vector<std::string> services;  // used so far, in the order first used
  TimePoint opened{};
  std::int64_t pid = 0;  // the provider process serving it
  bool kicked = false;
  std::vector<CommandRow> commands;  // running now, oldest first (live() fills them in)
  std::int64_t unlisted_commands = 0;  // running beyond kMaxSessionCommands
};

// At most this many service names are kept per session (a session can ask for any name).
inline constexpr std::size_t kMaxSessionServices = 16;
// Command rows kept per session, and the bytes of each command line kept.
inline constexpr std::size_t kMaxSessionCommands = 32;
inline constexpr std::size_t kMaxCommandText = 256;

// `argv` joined with spaces, cut to kMaxCommandText bytes (at a UTF-8
// boundary, with "…" at the end) without joining more than that.
std::string short_command_line(const std::vector<std::string>& argv);

class SessionStore {
 public:
  explicit SessionStore(Database& db) : db_(db) {}

  Result<void> add(const SessionRow& row);
  // Adds `service` to the session's list unless it is there (or the list is full).
  Result<void> note_service(const std::string& id, const std::string& service);
  Result<void> remove(const std::string& id);
  // A command of session `row.session_id` started: its row id, or 0 when the
  // session has kMaxSessionCommands rows already (then it is only counted).
  Result<std::int64_t> add_command(const CommandRow& row);
  // It ended: `id` as add_command returned it (0: uncounts one of `session_id`'s).
  Result<void> remove_command(std::int64_t id, const std::string& session_id);
  // Live sessions (of running provider processes), oldest first, with their commands.
  Result<std::vector<SessionRow>> live();
  // Marks a live session kicked; false: there is no live session `id`. Its provider ends it.
  Result<std::optional<SessionRow>> kick(const std::string& id);
  // The ids of `pid`'s sessions marked kicked.
  Result<std::vector<std::string>> kicked(std::int64_t pid);
  // Deletes rows (sessions and commands) of processes that no longer run; returns how many sessions.
  Result<std::int64_t> prune_dead();

 private:
  Database& db_;
};

// Whether process `pid` runs on this machine (kill(pid, 0)).
bool process_running(std::int64_t pid);

}  // namespace runsnack
