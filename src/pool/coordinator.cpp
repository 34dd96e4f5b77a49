#include "pool/coordinator.hpp"

#include "core/json_fields.hpp"
#include "pool/result_message.hpp"
#include "pool/wire.hpp"
#include "pool/workload.hpp"
#include "session/session.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <random>
#include <set>

namespace runsnack::pool {

namespace asio = boost::asio;
using json = nlohmann::json;

namespace {

// Handlers read a peer's JSON with accessors that do not throw; should one
// throw all the same (a bug of ours, not the peer's), the peer gets a refusal
// and its stream stays open, rather than the stream ending with no answer.
template <class Handler>
json answer_or_refuse(const char* what, Handler&& handle) {
  try {
    return handle();
  } catch (const json::exception& e) {
    spdlog::error("pool: {}: {}", what, e.what());
    return refusal("malformed message");
  }
}

}  // namespace

Coordinator::Coordinator(asio::any_io_executor ex, PoolStore& store, std::function<void(const json&)> on_event)
    : ex_(ex), store_(store), on_event_(std::move(on_event)), ops_(store, on_event_, std::random_device{}()),
      trainer_(store, on_event_,
               [this](const std::string& job) {
                 ops_.replication().forget_job(job);
                 ops_.forget_job_state(job);
               }),
      client_ops_(store, ops_, trainer_, on_event_),
      maintenance_timer_(ex), stalls_(std::chrono::milliseconds(store.policy().give_up_ms)) {}

void Coordinator::add_services(ServiceRouter& router) {
  router.add(kServiceWorker, {[this](std::shared_ptr<MuxStream> s, const json&, const ServiceContext& c) {
                                return serve_worker(std::move(s), c);
                              },
                              kServiceWorker, true});
  router.add(kServiceClient, {[this](std::shared_ptr<MuxStream> s, const json&, const ServiceContext& c) {
                                return serve_client(std::move(s), c);
                              },
                              kServiceClient, true});
}

void Coordinator::use_learned_scheduler() { ops_.use_learned_scheduler(Moment::read()); }

json Coordinator::learned_estimates(const std::string& device) const { return ops_.learned_estimates(device); }

void Coordinator::stop() {
  ops_.save_learned();
  stopping_ = true;
  maintenance_timer_.cancel();
}

asio::awaitable<void> Coordinator::run_maintenance() {
  while (!stopping_) {
    maintenance_timer_.expires_after(std::chrono::milliseconds(250));
    boost::system::error_code ec;
    co_await maintenance_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) break;
    if (++ticks_ % 40 == 0) ops_.save_learned();  // every ~10 s
    const auto now = Moment::read();
    auto n = store_.expire_leases(now.wall_ms());
    if (!n) spdlog::warn("pool: lease expiry: {}", n.error().what());
    else if (*n > 0) on_event_({{"event", "leases_expired"}, {"count", *n}});
    ops_.replication().tick(now.wall_ms(), {});  // shards no independent device can check any more
    if (ticks_ % 4 == 0) give_up_stuck_jobs(now);  // every ~1 s
    trainer_.tick(now.wall_ms());  // rounds that ended: averaged, the next started (a round waits at most a tick)
  }
}

void Coordinator::give_up_stuck_jobs(const Moment& now) {
  auto online = store_.online_worker_peers();  // the workers that may still get work
  auto loads = store_.running_job_loads(1000);
  if (!online || !loads) {
    spdlog::warn("pool: stall watch: {}", (online ? loads.error() : online.error()).what());
    return;
  }
  const std::set<std::string>& peers = *online;
  std::vector<StallWatch::JobView> views;
  std::map<std::string, std::string> why;
  for (const auto& l : *loads) {
    StallWatch::JobView v{l.job, l.pending, l.leased, 1, static_cast<std::int64_t>(peers.size())};
    const auto held = ops_.replication().held_tasks(l.job);
    // Only a job that looks stuck by its counts gets the closer look.
    if (l.pending > 0 && !peers.empty() && l.leased <= static_cast<std::int64_t>(held.size())) {
      auto bars = store_.job_bars(l.job, kStallScan);
      if (!bars) {
        spdlog::warn("pool: stall watch: {}", bars.error().what());
        return;
      }
      v.running = 0;
      for (const auto& t : bars->leased) v.running += held.count(t) ? 0 : 1;
      v.placeable = l.pending > static_cast<std::int64_t>(bars->pending.size()) ? 1 : 0;
      for (const auto& p : bars->pending)
        if (std::any_of(peers.begin(), peers.end(), [&](const std::string& peer) { return !p.barred.count(peer); }))
          ++v.placeable;
      if (StallWatch::stuck(v) && !bars->pending.empty()) {
        const auto& first = bars->pending.front();
        why[l.job] = "no online worker may run task " + first.task + " (each of the " + std::to_string(peers.size()) +
                     " online is barred from it" + (first.last_reason.empty() ? "" : ", last: " + first.last_reason) +
                     ") and nothing of the job still runs";
      }
    }
    views.push_back(std::move(v));
  }
  for (const auto& job : stalls_.step(views, now.wall_ms())) {
    const auto seconds = std::to_string(stalls_.give_up_after().count() / 1000);
    const std::string reason = "cannot complete: " + why[job] + " for " + seconds +
                               " s; a quorum needs that many workers on different peers (and networks): add workers, "
                               "or submit with fewer --replicas";
    if (auto r = store_.give_up_job(job, reason, now.wall_ms()); !r) {
      spdlog::warn("pool: giving up job {}: {}", job, r.error().what());
      continue;
    }
    ops_.replication().forget_job(job);
    ops_.forget_job_state(job);
    on_event_({{"event", "job_stuck"}, {"job", job}, {"reason", reason}});
  }
}

asio::awaitable<void> Coordinator::serve_worker(std::shared_ptr<MuxStream> stream, ServiceContext context) {
  WorkerSession session;
  session.consumer = context.consumer, session.peer = context.consumer.str(), session.address = context.address;
  session.audit = context.audit;
  asio::steady_timer idle(ex_);
  auto arm = [&] {
    idle.expires_after(kWorkerIdleTimeout);
    idle.async_wait([stream](const boost::system::error_code& ec) {
      if (!ec) stream->reset();
    });
  };
  arm();
  on_event_({{"event", "worker_connected"}, {"peer", session.peer}});
  ops_.worker_connected();
  std::string why;
  while (true) {
    auto req = co_await read_stream_message(*stream, kMaxPoolMessageBytes);
    if (!req) {
      why = req.error().what();
      break;
    }
    arm();
    // Frames announced by the message follow it; a count that cannot be
    // read leaves the stream out of step, so it closes.
    auto announced = announced_frames(*req);
    if (!announced) {
      why = announced.error().what();
      break;
    }
    session.frames.clear(), session.next_frame = 0;
    std::size_t budget = kMaxFrameBytes;
    bool cut = false;
    for (std::size_t i = 0; i < *announced && !cut; ++i) {
      std::array<std::uint8_t, kFrameHeaderBytes> header{};
      auto got = co_await stream->read_exact(asio::buffer(header));
      auto length = got ? frame_length(header, budget) : Result<std::uint32_t>(got.error());
      if (!length) {
        why = length.error().what(), cut = true;
        break;
      }
      budget -= *length;
      std::string bytes;  // allocated as it arrives: a frame may announce 12 MiB (MuxStream::read_growing)
      if (auto r = co_await stream->read_growing(*length, bytes); !r) {
        why = r.error().what(), cut = true;
        break;
      }
      session.frames.push_back(std::move(bytes));
    }
    if (cut) break;
    // The clock is read once per message: every op and the store see one time.
    const auto now = Moment::read();
    json answer = answer_or_refuse("worker message", [&] { return ops_.handle(session, now, *req); });
    if (const std::string op = string_or(*req, "op"); op == "result" || op == "results")
      trainer_.nudge(now.wall_ms());  // a round this ended: the next one starts before the worker's next claim
    session.frames.clear();  // up to kMaxFrameBytes: not held while the worker is idle
    auto w = co_await write_stream_message(*stream, answer);
    for (std::size_t i = 0; w && i < session.reply_frames.size(); ++i) {
      const std::string header = frame_header(session.reply_frames[i].size());
      w = co_await stream->write(asio::buffer(header));
      if (w) w = co_await stream->write(asio::buffer(session.reply_frames[i]));
    }
    session.reply_frames.clear();
    if (!w) {
      why = w.error().what();
      break;
    }
  }
  if (why.empty()) why = "stream closed";
  idle.cancel();
  const int released = ops_.worker_left(session, Moment::read());
  on_event_({{"event", "worker_gone"}, {"peer", session.peer}, {"reason", why}, {"requeued", released}});
}

asio::awaitable<void> Coordinator::serve_client(std::shared_ptr<MuxStream> stream, ServiceContext context) {
  while (true) {
    auto req = co_await read_stream_message(*stream, kMaxPoolMessageBytes);
    if (!req) break;
    const ClientSession session{context.consumer.str(), context.grant.id};
    json answer = answer_or_refuse("client message", [&] { return client_ops_.handle(session, Moment::read(), *req); });
    auto w = co_await write_stream_message(*stream, answer);
    if (!w) break;
  }
}

}  // namespace runsnack::pool
