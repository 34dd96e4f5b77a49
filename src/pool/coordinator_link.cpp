// Coordinator's entry for workers on another transport than a "pool-worker"
// stream (coordinator.hpp LinkedWorker): a browser's WebSocket
// (pool/browser/). Kept apart from coordinator.cpp so that transport stays
// out of the stream handler; what a stream's end does is mirrored here.
#include "pool/coordinator.hpp"

#include "core/json_fields.hpp"

#include <spdlog/spdlog.h>

namespace runsnack::pool {

using json = nlohmann::json;

void Coordinator::linked_worker_opened(const ServiceContext& context) {
  on_event_({{"event", "worker_connected"}, {"peer", context.consumer.str()}});
  ++workers_online_;
}

json Coordinator::linked_worker_request(const json& req, const ServiceContext& context, LinkedWorker& worker) {
  const std::string peer = context.consumer.str();
  // Any message renews the worker's leases, at most once a second (as serve_worker).
  const auto now = std::chrono::steady_clock::now();
  if (string_or(req, "op") == "heartbeat" || now - worker.last_renewal >= std::chrono::seconds(1)) {
    worker.last_renewal = now;
    if (auto hb = store_.heartbeat(peer, now_ms()); !hb) spdlog::warn("pool: heartbeat: {}", hb.error().what());
  }
  Frames none;
  try {
    return handle_worker(req, context, worker.device, worker.public_key, none);
  } catch (const json::exception& e) {  // a bug of ours: the peer gets a refusal, not a closed socket
    spdlog::error("pool: browser worker message: {}", e.what());
    return {{"ok", false}, {"error", "malformed message"}};
  }
}

void Coordinator::linked_worker_closed(const ServiceContext& context, const LinkedWorker& worker, const std::string& why) {
  const std::string peer = context.consumer.str();
  const std::string& device = worker.device;
  --workers_online_;
  if (!device.empty()) {
    waiting_.erase(device), found_nothing_.erase(device), calibrations_.erase(device), networks_.erase(device);
    if (learned_) learned_->device_left(device, now_s());
  }
  known_answers_.forget_peer(peer);
  replication_.worker_left(peer);
  auto released = store_.release_worker(peer, now_ms());
  on_event_({{"event", "worker_gone"}, {"peer", peer}, {"reason", why}, {"requeued", released ? *released : 0}});
}

}  // namespace runsnack::pool
