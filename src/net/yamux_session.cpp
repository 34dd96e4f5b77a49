#include "net/yamux_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace runsnack {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Frames per gather write: enough to coalesce bursts of control frames and
// many streams' data, well under IOV_MAX (1024) at two buffers per frame.
constexpr std::size_t kMaxFramesPerWrite = 256;

// The read buffer's first size: a few frames (MuxConfig::read_buffer_bytes).
constexpr std::size_t kMinReadBuffer = 16 * 1024;

// A Data payload with at least this much still to come, and nothing else
// buffered, is read straight into a receive chunk the stream then keeps:
// the bytes skip in_ and the copy out of it.
constexpr std::size_t kDirectPayloadBytes = ReceiveQueue::kMinAdoptBytes;

asio::awaitable<void> wait_signal(asio::steady_timer& signal) {
  co_await signal.async_wait(asio::as_tuple(asio::use_awaitable));
}

void make_signal(asio::steady_timer& t) { t.expires_at(Clock::time_point::max()); }

}  // namespace

std::shared_ptr<Mux> Mux::create(std::unique_ptr<Transport> transport, yamux::Role role,
                                 MuxConfig config) {
  return std::shared_ptr<Mux>(new Mux(std::move(transport), role, config));
}

Mux::Mux(std::unique_ptr<Transport> transport, yamux::Role role, MuxConfig config)
    : transport_(std::move(transport)),
      executor_(transport_->get_executor()),
      config_(config),
      state_(role, config.limits),
      writer_signal_(executor_),
      flushed_signal_(executor_),
      accept_signal_(executor_),
      keepalive_timer_(executor_) {
  make_signal(writer_signal_);
  make_signal(flushed_signal_);
  make_signal(accept_signal_);
}

Mux::~Mux() = default;

asio::awaitable<void> Mux::run() {
  using namespace asio::experimental::awaitable_operators;
  auto self = shared_from_this();
  if (run_called_) co_return;
  run_called_ = true;
  state_.note_activity(Clock::now());
  // Learn the path's round-trip time at once: receive windows grow only with
  // one (MuxState::consumed), and without it a new session on a 40 ms path
  // moved bulk data at half the link rate until the first keepalive ping.
  std::uint32_t probe_id = 0;
  if (auto probe = state_.start_ping(Clock::now(), probe_id)) enqueue(*probe);
  // Each of the three ends once done_ is set (finish() closes the transport
  // and wakes every signal), so && returns when the connection is over.
  co_await (reader() && writer() && keepalive());
}

std::uint64_t Mux::enqueue(const yamux::FrameHeader& h, asio::const_buffer payload, bool reply) {
  if (done_) return 0;
  queue_.push_back(OutFrame{yamux::encode_header(h), payload, reply});
  pending_replies_ += reply;
  writer_signal_.cancel();
  return ++queued_seq_;
}

void Mux::flush_control(bool replies) {
  for (const auto& h : ctrl_) enqueue(h, {}, replies);
  ctrl_.clear();
}

bool Mux::hold_message_bytes(std::size_t n) {
  if (n > config_.message_budget - std::min(message_bytes_, config_.message_budget)) return false;
  message_bytes_ += n;
  return true;
}

void Mux::begin_close(Error reason, bool graceful) {
  if (closing_) return;
  closing_ = true;
  graceful_ = graceful;
  close_reason_ = std::move(reason);
  writer_signal_.cancel();
}

void Mux::close(PeerWait wait) {
  if (closing_ || done_) return;
  close_wait_ = wait;
  enqueue(state_.go_away(yamux::GoAwayCode::normal));
  begin_close(Error(errc::closed, "yamux: session closed locally"), true);
}

void Mux::give_up(Error reason) {
  if (!closing_) lost_ = silent_ = true;
  begin_close(std::move(reason), false);
  stop_transport();  // aborts a read or write that would never finish
}

void Mux::stop_transport() {
  if (silent_ && config_.quiet_when_lost) transport_->abandon();
  else transport_->close();
}

void Mux::finish() {
  if (done_) return;
  done_ = true;
  stop_transport();
  Error why = close_reason_.value_or(Error(errc::closed, "yamux: session ended"));
  // Copy: on_reset must not see the map change under it.
  std::vector<MuxStream*> streams;
  for (auto& [id, s] : streams_) streams.push_back(s);
  for (auto* s : streams) s->on_reset(why);
  accept_queue_.clear();
  accept_signal_.cancel();
  flushed_signal_.cancel();
  writer_signal_.cancel();
  keepalive_timer_.cancel();
  for (auto& [id, p] : pings_) p->timer.cancel();
}

asio::awaitable<void> Mux::writer() {
  while (!done_) {
    if (queue_.empty() || (closing_ && !graceful_)) {
      if (closing_) break;
      co_await wait_signal(writer_signal_);
      continue;
    }
    std::size_t frames = std::min(queue_.size(), kMaxFramesPerWrite);
    gather_.clear();
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < frames; ++i) {
      // deque::push_back keeps references valid, so new frames may be queued
      // while this write is in flight.
      const OutFrame& f = queue_[i];
      gather_.emplace_back(f.header.data(), f.header.size());
      if (f.payload.size() > 0) gather_.push_back(f.payload);
      bytes += f.header.size() + f.payload.size();
    }
    write_since_ = Clock::now();
    try {
      co_await transport_->write(gather_);
    } catch (const boost::system::system_error& e) {
      write_since_.reset();
      if (!closing_) lost_ = true;
      begin_close(Error(errc::io_error, std::string("yamux: write failed: ") + e.what()), false);
      break;
    }
    write_since_.reset();
    for (std::size_t i = 0; i < frames; ++i) pending_replies_ -= queue_[i].reply;
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(frames));
    flushed_seq_ += frames;
    bytes_out_.fetch_add(bytes, std::memory_order_relaxed);
    flushed_signal_.cancel();
  }
  if (closing_ && graceful_ && !done_) {
    write_since_ = Clock::now();  // the watchdog bounds a stuck shutdown too
    co_await transport_->shutdown(close_wait_);
  }
  finish();
}

asio::awaitable<void> Mux::reader() {
  const std::size_t max_size = std::max(config_.read_buffer_bytes, kMinReadBuffer);
  while (!done_ && !closing_) {
    if (pending_replies_ > config_.max_pending_replies) {
      // The peer is not reading what it asked for: read no more of it until
      // the writer catches up (or write_timeout ends the session).
      co_await wait_signal(flushed_signal_);
      continue;
    }
    if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
    if (!in_ || (in_grow_ && in_size_ < max_size)) {
      std::size_t size = in_ ? std::min(in_size_ * 2, max_size) : kMinReadBuffer;
      auto bigger = std::make_unique_for_overwrite<std::uint8_t[]>(size);
      std::copy(in_.get() + in_begin_, in_.get() + in_end_, bigger.get());
      in_ = std::move(bigger);
      in_size_ = size;
      in_end_ -= in_begin_;
      in_begin_ = 0;
    } else if (in_end_ == in_size_) {  // keep the partial header, make room behind it
      std::copy(in_.get() + in_begin_, in_.get() + in_end_, in_.get());
      in_end_ -= in_begin_;
      in_begin_ = 0;
    }
    // Bulk payload: read it straight into a receive chunk (see kDirectPayloadBytes).
    // Right after one, read the next header alone: if it starts another bulk
    // payload, that goes straight into a chunk too instead of through in_.
    ChunkPtr chunk;
    asio::mutable_buffer target(in_.get() + in_end_, in_size_ - in_end_);
    if (in_begin_ == in_end_ && payload_deliver_ && payload_left_ >= kDirectPayloadBytes) {
      chunk = chunks_.get();
      target = asio::buffer(chunk.get(), std::min<std::size_t>(payload_left_, ChunkPool::kChunkBytes));
    } else if (direct_ && in_begin_ == in_end_ && payload_left_ == 0) {
      target = asio::buffer(in_.get() + in_end_, yamux::kHeaderSize);
    }
    std::size_t n = 0;
    try {
      n = co_await transport_->read_some(target);
    } catch (const boost::system::system_error& e) {
      chunks_.put(std::move(chunk));
      if (!closing_) {
        bool eof = e.code() == asio::error::eof;
        // A refused connection is a transport's way to say the other side refused us (a refused
        // grant proof, session/pending_auth.hpp): the close reason carries it to whoever reports it.
        if (!eof && e.code() != asio::error::connection_refused) spdlog::warn("yamux: read failed: {}", e.what());
        // An end of TLS (close_notify) is the peer's; a TCP end without it, a reset or a broken
        // record is a fault the peer did not choose (lost()).
        lost_ = !eof && e.code() != asio::error::connection_refused;
        begin_close(Error(eof ? errc::closed : errc::io_error,
                          eof ? "yamux: peer closed the connection"
                              : std::string("yamux: read failed: ") + e.what()),
                    false);
      }
      break;
    }
    bytes_in_.fetch_add(n, std::memory_order_relaxed);
    state_.note_activity(Clock::now());
    direct_ = chunk != nullptr;
    if (chunk) {
      deliver_direct(std::move(chunk), n);
      continue;
    }
    in_grow_ = n == in_size_ - in_end_;
    in_end_ += n;
    if (!process_input()) break;
  }
}

void Mux::deliver_direct(ChunkPtr chunk, std::size_t n) {
  payload_left_ -= static_cast<std::uint32_t>(n);
  auto it = streams_.find(payload_stream_);
  if (it == streams_.end()) {
    chunks_.put(std::move(chunk));
  } else if (n >= ReceiveQueue::kMinAdoptBytes) {
    it->second->deliver_chunk(std::move(chunk), n);
  } else {  // a short read: copy it rather than hold a mostly empty chunk
    it->second->deliver(chunk.get(), n);
    chunks_.put(std::move(chunk));
  }
}

bool Mux::process_input() {
  while (!closing_) {
    if (payload_left_ > 0) {
      std::size_t take = std::min<std::size_t>(payload_left_, in_end_ - in_begin_);
      if (take == 0) return true;
      if (payload_deliver_) {
        auto it = streams_.find(payload_stream_);
        if (it != streams_.end()) it->second->deliver(in_.get() + in_begin_, take);
      }
      in_begin_ += take;
      payload_left_ -= static_cast<std::uint32_t>(take);
      continue;
    }
    if (in_end_ - in_begin_ < yamux::kHeaderSize) return true;
    auto decoded = yamux::decode_header(
        std::span<const std::uint8_t, yamux::kHeaderSize>(in_.get() + in_begin_, yamux::kHeaderSize));
    in_begin_ += yamux::kHeaderSize;
    if (!decoded) {
      spdlog::warn("yamux: closing connection: {}", decoded.error().message);
      enqueue(state_.go_away(yamux::GoAwayCode::protocol_error));
      begin_close(Error(errc::malformed, decoded.error().message), true);
      return false;
    }
    if (!handle_frame(*decoded)) return false;
  }
  return false;
}

bool Mux::handle_frame(const yamux::FrameHeader& h) {
  auto now = Clock::now();
  yamux::Inbound in = state_.on_frame(h, now, ctrl_);
  flush_control(/*replies=*/true);
  if (in.fault) {
    spdlog::warn("yamux: closing connection: {} (stream {})", in.fault->reason, h.stream_id);
    begin_close(Error(errc::malformed, std::string("yamux: ") + in.fault->reason), true);
    return false;
  }
  if (in.go_away) {
    bool normal = *in.go_away == yamux::GoAwayCode::normal;
    if (!normal) spdlog::warn("yamux: peer sent GoAway code {}", static_cast<unsigned>(*in.go_away));
    // A normal GoAway only stops new streams; existing ones run to their end
    // and the peer closes the connection.
    if (!normal) {
      begin_close(Error(errc::closed, "yamux: peer ended the session with an error"), false);
      return false;
    }
    if (!close_reason_) close_reason_ = Error(errc::closed, "yamux: the peer is ending the session");
    accept_signal_.cancel();
  }
  if (in.pong) {
    auto it = pings_.find(*in.pong);
    if (it != pings_.end()) {
      it->second->answered = true;
      it->second->timer.cancel();
    }
  }
  if (in.stream_error) spdlog::warn("yamux: stream {} refused or reset: {}", h.stream_id, in.stream_error);
  if (in.opened) {
    auto stream = std::make_shared<MuxStream>(shared_from_this(), h.stream_id);
    streams_[h.stream_id] = stream.get();
    accept_queue_.push_back(std::move(stream));
    accept_signal_.cancel();
  }
  payload_stream_ = h.stream_id;
  payload_deliver_ = in.deliver > 0;
  payload_left_ = in.deliver > 0 ? in.deliver : in.discard;

  auto it = streams_.find(h.stream_id);
  if (it != streams_.end() && h.stream_id != 0) {
    MuxStream* s = it->second;
    if (in.send_window_grew) s->wake_writer();
    if (in.remote_fin) s->on_remote_fin();
    if (in.reset) s->on_reset(Error(errc::closed, "yamux: stream reset"));
  }
  return true;
}

asio::awaitable<void> Mux::keepalive() {
  auto tick = std::min({config_.limits.keepalive_interval, config_.limits.keepalive_timeout,
                        config_.write_timeout}) / 4;
  tick = std::max(tick, std::chrono::milliseconds(5));
  while (!done_) {
    keepalive_timer_.expires_after(tick);
    co_await keepalive_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (done_) break;
    auto now = Clock::now();
    if (write_since_ && now - *write_since_ > config_.write_timeout) {
      spdlog::warn("yamux: write stalled for {} ms, closing", config_.write_timeout.count());
      give_up(Error(errc::timeout, "yamux: write timed out (peer not reading)"));  // the writer then finishes
      continue;
    }
    if (closing_) continue;
    // A tick without traffic: give back what a bulk transfer made the transport grow.
    std::uint64_t moved = bytes_in() + bytes_out();
    if (moved != moved_at_last_tick_) {
      moved_at_last_tick_ = moved;
      trimmed_ = false;
    } else if (!trimmed_) {
      transport_->trim();
      chunks_.trim();
      trimmed_ = true;
    }
    auto action = state_.keepalive(now, ctrl_);
    flush_control();
    if (action == yamux::KeepaliveAction::dead) {
      spdlog::warn("yamux: peer silent, keepalive timed out");
      give_up(Error(errc::timeout, "yamux: keepalive timed out (peer silent)"));
    }
  }
}

asio::awaitable<Result<std::shared_ptr<MuxStream>>> Mux::open_stream() {
  if (done_ || closing_) co_return fail(errc::closed, "yamux: session closed");
  auto id = state_.open(ctrl_);
  if (!id) co_return id.error();
  flush_control();
  auto stream = std::make_shared<MuxStream>(shared_from_this(), *id);
  streams_[*id] = stream.get();
  co_return stream;
}

asio::awaitable<Result<std::shared_ptr<MuxStream>>> Mux::accept_stream() {
  auto self = shared_from_this();
  for (;;) {
    if (!accept_queue_.empty()) {
      auto stream = std::move(accept_queue_.front());
      accept_queue_.pop_front();
      state_.accepted(stream->id(), ctrl_);
      flush_control();
      co_return stream;
    }
    if (done_ || closing_) co_return close_reason_.value_or(Error(errc::closed, "yamux: session closed"));
    if (state_.remote_go_away()) co_return fail(errc::closed, "yamux: peer is going away");
    co_await wait_signal(accept_signal_);
  }
}

asio::awaitable<Result<std::chrono::microseconds>> Mux::ping() {
  auto self = shared_from_this();
  if (done_ || closing_) co_return fail(errc::closed, "yamux: session closed");
  auto start = Clock::now();
  std::uint32_t id = 0;
  auto h = state_.start_ping(start, id);
  if (!h) co_return h.error();
  enqueue(*h);
  PingWait wait{asio::steady_timer(executor_), false};
  wait.timer.expires_after(config_.limits.keepalive_timeout);
  pings_[id] = &wait;
  co_await wait.timer.async_wait(asio::as_tuple(asio::use_awaitable));
  pings_.erase(id);
  state_.forget_ping(id);
  if (wait.answered)
    co_return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  if (done_) co_return fail(errc::closed, "yamux: session closed");
  co_return fail(errc::timeout, "yamux: ping timed out");
}

}  // namespace runsnack
