#pragma once
// The run sync's states (fs::SyncState), kept in the provider's memory between syncs: loading a
// 16k-entry state from disk took as long as checking the workspace against it (docs/PERFORMANCE.md).
// A sync takes its workspace's state out (a second sync at the same time loads its own from disk)
// and puts it back after a sync that succeeded; after a failed one the next sync loads the state
// last saved.
//
// Bounded by what the states take in memory (fs::SyncState::memory_bytes), not by their number: a
// consumer's states together at most `bytes_per_consumer`, everyone's at most `bytes_total`, the
// least recently used dropped first; a state larger than a consumer's share is not kept at all
// (its next sync loads it from disk). A state unused for `idle` is dropped by release_idle (a
// timer calls it: workspace_transfer.cpp). Dropped states are freed by the call that drops them,
// outside the lock: call it off the io thread.
//
// No clock here: callers pass the time. Thread-safe.

#include "fs/transfer.hpp"

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::exec {

class KeptSyncStates {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    std::size_t bytes_per_consumer = 0;
    std::size_t bytes_total = 0;
    Clock::duration idle{};
  };

  explicit KeptSyncStates(Limits limits) : limits_(limits) {}
  KeptSyncStates(const KeptSyncStates&) = delete;
  KeptSyncStates& operator=(const KeptSyncStates&) = delete;

  // The state kept for `key` (the state's base path), taken out; null when none is kept.
  std::unique_ptr<fs::SyncState> take(const std::string& key);
  // Keeps `state` for `key`, a state of `consumer`'s, used `now`; drops what it must to stay within
  // the limits (and what has been idle too long). Returns whether `state` was kept.
  bool put_back(const std::string& consumer, const std::string& key, std::unique_ptr<fs::SyncState> state,
                Clock::time_point now);
  // Drops the state kept for `key` (its workspace was removed).
  void drop(const std::string& key);
  // Drops every state unused since `now - idle`; returns the bytes they took.
  std::size_t release_idle(Clock::time_point now);
  // When the oldest kept state turns idle; none when nothing is kept.
  std::optional<Clock::time_point> next_idle() const;

  std::size_t bytes() const;
  std::size_t bytes_of(const std::string& consumer) const;
  std::size_t count() const;

 private:
  struct Kept {
    std::string consumer;
    std::unique_ptr<fs::SyncState> state;
    std::size_t bytes = 0;
    Clock::time_point used{};
  };
  using Map = std::map<std::string, Kept>;
  // Moves the least recently used state (of `consumer`, or of anyone when empty) into `out`.
  bool drop_oldest(const std::string& consumer, std::vector<std::unique_ptr<fs::SyncState>>& out);
  std::size_t bytes_of_locked(const std::string& consumer) const;
  void drop_idle(Clock::time_point now, std::vector<std::unique_ptr<fs::SyncState>>& out);
  void erase(Map::iterator it, std::vector<std::unique_ptr<fs::SyncState>>& out);

  const Limits limits_;
  mutable std::mutex mutex_;
  Map kept_;
  std::map<std::string, std::size_t> consumer_bytes_;
  std::size_t total_bytes_ = 0;
};

}  // namespace runsnack::exec
