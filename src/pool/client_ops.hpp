#pragma once
// The "pool-client" ops (wire.hpp draws them), one function each, without
// I/O: submit, status and jobs, result, cancel, credits. Each takes the
// client's peer, the moment the message came (read once per message) and the
// parsed message, and returns the answer. The first message of a session
// whose link carries credits (`pool link --credits N`) mints them for its peer.
// client_ops_test.cpp drives them on an in-memory store.

#include "pool/pool_store.hpp"
#include "pool/trainer.hpp"
#include "pool/worker_ops.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <set>
#include <string>

namespace runsnack::pool {

// Failed attempts a job's status lists (the oldest first).
inline constexpr std::int64_t kMaxFailuresShown = 20;

// A client's session as the ops see it.
struct ClientSession {
  std::string peer;   // the session's PeerId (text)
  std::string grant;  // the id of the link's grant it came by
};

class ClientOps {
 public:
  // `workers`: what the worker side knows (verification, networks, the learned scheduler), shown by status.
  // `trainer`: the training jobs (train, train_status, train_result, train_cancel go to it).
  ClientOps(PoolStore& store, WorkerOps& workers, Trainer& trainer, std::function<void(const nlohmann::json&)> on_event);
  ClientOps(const ClientOps&) = delete;
  ClientOps& operator=(const ClientOps&) = delete;

  nlohmann::json handle(const ClientSession& s, const Moment& now, const nlohmann::json& req);

  nlohmann::json submit(const std::string& peer, const Moment& now, const nlohmann::json& req);
  // "status": every job and the devices; "jobs" (own_jobs_only): the peer's jobs.
  nlohmann::json status(const std::string& peer, const nlohmann::json& req, bool own_jobs_only);
  nlohmann::json result(const std::string& peer, const nlohmann::json& req);
  nlohmann::json cancel(const std::string& peer, const Moment& now, const nlohmann::json& req);
  nlohmann::json credits(const std::string& peer);

 private:
  PoolStore& store_;
  WorkerOps& workers_;
  Trainer& trainer_;
  std::function<void(const nlohmann::json&)> on_event_;
  std::set<std::string> grants_without_credits_;  // link grants seen that carry no (more) credits
};

}  // namespace runsnack::pool
