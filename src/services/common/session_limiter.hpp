#pragma once
// Per-session limits a service keeps across its streams: how many of a
// session's streams it serves at once (forward: terms.max_connections;
// cuda: kMaxServersPerSession) and one bandwidth bucket all of them share,
// both directions (the grant's bandwidth_bytes_per_s, for pump.hpp).
//
// acquire() hands out a slot that counts for as long as it lives; a
// session's entry is removed with its last slot, so what a peer can make us
// hold is bounded by its open streams.
//
// Threading: one executor. The limiter is shared by a service's handler
// (shared_ptr) and outlives the slots it hands out (each slot holds it).

#include "services/common/token_bucket.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace runsnack {

class SessionLimiter;

// Counts one stream of a session until destroyed. Move-only.
class SessionSlot {
 public:
  SessionSlot(SessionSlot&& other) noexcept = default;
  SessionSlot& operator=(SessionSlot&&) = delete;
  SessionSlot(const SessionSlot&) = delete;
  ~SessionSlot();

  // The session's bucket; null without a bandwidth limit.
  const std::shared_ptr<TokenBucket>& bucket() const { return bucket_; }

 private:
  friend class SessionLimiter;
  SessionSlot(std::shared_ptr<SessionLimiter> owner, std::string session, std::shared_ptr<TokenBucket> bucket)
      : owner_(std::move(owner)), session_(std::move(session)), bucket_(std::move(bucket)) {}

  std::shared_ptr<SessionLimiter> owner_;  // null once moved from
  std::string session_;
  std::shared_ptr<TokenBucket> bucket_;
};

class SessionLimiter : public std::enable_shared_from_this<SessionLimiter> {
 public:
  // A slot for `session`, or none when it already holds `max_open` (none: no
  // limit). The first slot of a session with `bytes_per_s` makes its bucket.
  std::optional<SessionSlot> acquire(const std::string& session, std::optional<std::int64_t> max_open,
                                     std::optional<std::int64_t> bytes_per_s);

  std::int64_t open(const std::string& session) const;
  std::size_t sessions() const { return sessions_.size(); }

 private:
  friend class SessionSlot;
  void release(const std::string& session);

  struct State {
    std::int64_t open = 0;
    std::shared_ptr<TokenBucket> bucket;
  };
  std::map<std::string, State> sessions_;
};

}  // namespace runsnack
