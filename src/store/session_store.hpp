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
// Ownership and threads: as GrantStore (borrows its Database; one thread).

#include "core/clock.hpp"
#include "core/error.hpp"
#include "store/database.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runsnack {

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
};

// At most this many service names are kept per session (a session can ask for any name).
inline constexpr std::size_t kMaxSessionServices = 16;

class SessionStore {
 public:
  explicit SessionStore(Database& db) : db_(db) {}

  Result<void> add(const SessionRow& row);
  // Adds `service` to the session's list unless it is there (or the list is full).
  Result<void> note_service(const std::string& id, const std::string& service);
  Result<void> remove(const std::string& id);
  // Live sessions (of running provider processes), oldest first.
  Result<std::vector<SessionRow>> live();
  // Marks a live session kicked; false: there is no live session `id`. Its provider ends it.
  Result<std::optional<SessionRow>> kick(const std::string& id);
  // The ids of `pid`'s sessions marked kicked.
  Result<std::vector<std::string>> kicked(std::int64_t pid);
  // Deletes rows of processes that no longer run; returns how many.
  Result<std::int64_t> prune_dead();

 private:
  Database& db_;
};

// Whether process `pid` runs on this machine (kill(pid, 0)).
bool process_running(std::int64_t pid);

}  // namespace runsnack
