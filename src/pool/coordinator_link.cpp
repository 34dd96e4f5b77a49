// Coordinator's entry for workers on another transport than a "pool-worker"
// stream (coordinator.hpp LinkedWorker): a browser's WebSocket
// (pool/browser/). The same ops as serve_worker (WorkerOps), without binary
// frames; kept apart from coordinator.cpp so that transport stays out of the
// stream handler.
#include "pool/coordinator.hpp"

#include <spdlog/spdlog.h>

namespace runsnack::pool {

using json = nlohmann::json;

namespace {
WorkerSession& session_of(Coordinator::LinkedWorker& worker, const ServiceContext& context) {
  WorkerSession& s = worker.session;
  if (s.peer.empty()) {
    s.consumer = context.consumer;
    s.peer = context.consumer.str();
    s.address = context.address;
    s.audit = context.audit;
  }
  return s;
}
}  // namespace

void Coordinator::linked_worker_opened(const ServiceContext& context) {
  on_event_({{"event", "worker_connected"}, {"peer", context.consumer.str()}});
  ops_.worker_connected();
}

json Coordinator::linked_worker_request(const json& req, const ServiceContext& context, LinkedWorker& worker) {
  WorkerSession& s = session_of(worker, context);
  const auto now = Moment::read();  // once per message, as serve_worker
  try {
    json answer = ops_.handle(s, now, req);
    s.reply_frames.clear();  // a WebSocket carries no frames: a browser that asks for them gets none
    return answer;
  } catch (const json::exception& e) {  // a bug of ours: the peer gets a refusal, not a closed socket
    spdlog::error("pool: browser worker message: {}", e.what());
    return refusal("malformed message");
  }
}

void Coordinator::linked_worker_closed(const ServiceContext& context, LinkedWorker& worker, const std::string& why) {
  WorkerSession& s = session_of(worker, context);
  const int released = ops_.worker_left(s, Moment::read());
  on_event_({{"event", "worker_gone"}, {"peer", s.peer}, {"reason", why}, {"requeued", released}});
}

}  // namespace runsnack::pool
