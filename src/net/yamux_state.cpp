#include "net/yamux_state.hpp"

#include <algorithm>
#include <limits>

namespace runsnack::yamux {
namespace {

FrameHeader window_update(std::uint32_t id, std::uint16_t flags, std::uint32_t delta) {
  return FrameHeader{FrameType::window_update, flags, id, delta};
}

}  // namespace

MuxState::MuxState(Role role, MuxLimits limits)
    : role_(role), limits_(limits), next_id_(role == Role::client ? 1 : 2), ping_tokens_(limits.ping_burst) {
  limits_.max_window = std::max(limits_.max_window, limits_.initial_window);
}

bool MuxState::is_peer_id(std::uint32_t id) const {
  // Client streams are odd, server streams even.
  bool odd = (id % 2) == 1;
  return role_ == Role::client ? !odd : odd;
}

Inbound MuxState::fault(GoAwayCode code, const char* reason, std::vector<FrameHeader>& out) {
  out.push_back(go_away(code));
  Inbound in;
  in.fault = Fault{code, reason};
  return in;
}

void MuxState::forget(std::uint32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  if (it->second.incoming && !it->second.accepted) --backlog_;
  window_growth_ -= it->second.recv_window - limits_.initial_window;
  streams_.erase(it);
}

void MuxState::maybe_forget(std::uint32_t id, const Stream& s) {
  // Both directions finished: nothing more can arrive or leave. An incoming
  // stream still in the backlog stays until accepted, so the app sees it.
  if (s.local_fin && s.remote_fin && (!s.incoming || s.accepted)) forget(id);
}

Inbound MuxState::on_frame(const FrameHeader& h, SteadyTime now, std::vector<FrameHeader>& out) {
  switch (h.type) {
    case FrameType::data:
    case FrameType::window_update:
      return on_stream_frame(h, now, out);
    case FrameType::ping:
      return on_ping(h, now, out);
    case FrameType::go_away:
      return on_go_away(h, out);
  }
  return fault(GoAwayCode::protocol_error, "unknown frame type", out);
}

Inbound MuxState::on_stream_frame(const FrameHeader& h, SteadyTime now,
                                  std::vector<FrameHeader>& out) {
  const bool is_data = h.type == FrameType::data;
  if (h.stream_id == 0) return fault(GoAwayCode::protocol_error, "stream frame on stream id 0", out);

  Inbound in;
  in.stream_id = h.stream_id;
  auto it = streams_.find(h.stream_id);

  if (h.has(flag::syn)) {
    if (it != streams_.end()) return fault(GoAwayCode::protocol_error, "duplicate SYN", out);
    if (!is_peer_id(h.stream_id))
      return fault(GoAwayCode::protocol_error, "SYN with a stream id of our parity", out);
    const char* refuse = nullptr;
    if (local_go_away_) refuse = "stream opened after our GoAway";
    else if (limits_.accept_backlog == 0) refuse = "this side accepts no streams";
    else if (streams_.size() >= limits_.max_streams) refuse = "too many streams";
    else if (backlog_ >= limits_.accept_backlog) refuse = "accept backlog full";
    if (refuse != nullptr || h.has(flag::rst)) {
      if (!h.has(flag::rst)) out.push_back(window_update(h.stream_id, flag::rst, 0));
      in.stream_error = refuse;
      in.discard = is_data ? h.length : 0;
      return in;
    }
    Stream s;
    s.incoming = true;
    s.send_window = limits_.initial_window;
    s.recv_window = limits_.initial_window;
    s.recv_credit = limits_.initial_window;
    s.epoch = now;
    it = streams_.emplace(h.stream_id, s).first;
    ++backlog_;
    in.opened = true;
  }

  if (it == streams_.end()) {
    // Most likely a stream we reset or forgot: the peer had frames in flight.
    in.discard = is_data ? h.length : 0;
    return in;
  }
  Stream& s = it->second;

  if (h.has(flag::rst)) {
    in.discard = is_data ? h.length : 0;
    in.reset = true;
    forget(h.stream_id);
    return in;
  }
  if (h.has(flag::ack) && !s.incoming) s.acked = true;

  if (is_data) {
    if (h.length > s.recv_credit)
      return fault(GoAwayCode::protocol_error, "peer exceeded the receive window", out);
    if (s.remote_fin && h.length > 0) {
      // Data after the peer's own FIN: the stream is broken, the connection is not.
      out.push_back(window_update(h.stream_id, flag::rst, 0));
      in.stream_error = "data after FIN";
      in.discard = h.length;
      in.reset = true;
      forget(h.stream_id);
      return in;
    }
    s.recv_credit -= h.length;
    s.unread += h.length;
    in.deliver = h.length;
  } else if (h.length > 0) {
    if (h.length > std::numeric_limits<std::uint32_t>::max() - s.send_window)
      return fault(GoAwayCode::protocol_error, "send window overflow", out);
    s.send_window += h.length;
    in.send_window_grew = true;
  }

  if (h.has(flag::fin) && !s.remote_fin) {
    s.remote_fin = true;
    in.remote_fin = true;
    maybe_forget(h.stream_id, s);
  }
  return in;
}

Inbound MuxState::on_ping(const FrameHeader& h, SteadyTime now, std::vector<FrameHeader>& out) {
  if (h.stream_id != 0) return fault(GoAwayCode::protocol_error, "ping on a stream", out);
  Inbound in;
  if (h.has(flag::syn)) {
    // Token bucket: a burst, then pings_per_second. Answers cost us a write
    // each; a peer asking faster than any keepalive or RTT probe would is flooding.
    if (ping_refill_) {
      double seconds = std::max(0.0, std::chrono::duration<double>(now - *ping_refill_).count());
      ping_tokens_ = std::min<double>(limits_.ping_burst, ping_tokens_ + seconds * limits_.pings_per_second);
    }
    ping_refill_ = now;
    if (ping_tokens_ < 1) return fault(GoAwayCode::protocol_error, "ping flood", out);
    ping_tokens_ -= 1;
    out.push_back(FrameHeader{FrameType::ping, flag::ack, 0, h.length});
  } else if (h.has(flag::ack)) {
    auto it = pings_.find(h.length);
    if (it != pings_.end()) {  // unknown ids (late, or unsolicited) are ignored
      rtt_ = std::chrono::duration_cast<std::chrono::microseconds>(now - it->second);
      pings_.erase(it);
      in.pong = h.length;
    }
  }
  return in;
}

Inbound MuxState::on_go_away(const FrameHeader& h, std::vector<FrameHeader>& out) {
  if (h.stream_id != 0) return fault(GoAwayCode::protocol_error, "GoAway on a stream", out);
  Inbound in;
  remote_go_away_ = true;
  in.go_away = h.length <= 2 ? static_cast<GoAwayCode>(h.length) : GoAwayCode::internal_error;
  return in;
}

Result<std::uint32_t> MuxState::open(std::vector<FrameHeader>& out) {
  if (remote_go_away_ || local_go_away_) return fail(errc::closed, "yamux: session is going away");
  if (streams_.size() >= limits_.max_streams) return fail(errc::exhausted, "yamux: too many streams");
  if (next_id_ > std::numeric_limits<std::uint32_t>::max() - 2)
    return fail(errc::exhausted, "yamux: stream ids exhausted");
  std::uint32_t id = next_id_;
  next_id_ += 2;
  Stream s;
  s.send_window = limits_.initial_window;
  s.recv_window = limits_.initial_window;
  s.recv_credit = limits_.initial_window;
  streams_.emplace(id, s);
  out.push_back(window_update(id, flag::syn, 0));
  return id;
}

void MuxState::accepted(std::uint32_t id, std::vector<FrameHeader>& out) {
  auto it = streams_.find(id);
  if (it == streams_.end() || !it->second.incoming || it->second.accepted) return;
  it->second.accepted = true;
  --backlog_;
  out.push_back(window_update(id, flag::ack, 0));
  maybe_forget(id, it->second);
}

Result<FrameHeader> MuxState::next_data(std::uint32_t id, std::size_t want) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return fail(errc::closed, "yamux: stream reset");
  Stream& s = it->second;
  if (s.local_fin) return fail(errc::closed, "yamux: stream closed for writing");
  std::size_t n = std::min<std::size_t>({want, s.send_window, limits_.max_frame});
  if (n < want && n < limits_.min_send_frame) n = 0;  // wait for a window worth a frame
  s.send_window -= static_cast<std::uint32_t>(n);
  return FrameHeader{FrameType::data, 0, id, static_cast<std::uint32_t>(n)};
}

Result<FrameHeader> MuxState::close_write(std::uint32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return fail(errc::closed, "yamux: stream reset");
  if (it->second.local_fin) return fail(errc::closed, "yamux: stream already closed for writing");
  it->second.local_fin = true;
  maybe_forget(id, it->second);
  return window_update(id, flag::fin, 0);
}

std::optional<FrameHeader> MuxState::reset(std::uint32_t id) {
  if (!streams_.contains(id)) return std::nullopt;
  forget(id);
  return window_update(id, flag::rst, 0);
}

std::optional<FrameHeader> MuxState::consumed(std::uint32_t id, std::uint32_t n, SteadyTime now) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return std::nullopt;
  Stream& s = it->second;
  n = std::min(n, s.unread);
  s.unread -= n;
  s.consumed += n;
  // No update while the peer cannot send anyway, nor for tiny reads: wait
  // until half the window is consumed (HashiCorp does the same).
  if (s.remote_fin || s.consumed < s.recv_window / 2) return std::nullopt;

  std::uint32_t delta = s.consumed;
  // Auto-tuning (as QUIC implementations do): half a window consumed within
  // ~2 RTTs means the window, not the application, limits the rate.
  auto rtt = std::max(rtt_, limits_.min_tuning_rtt);
  auto elapsed = now - s.epoch;
  double fraction = static_cast<double>(s.consumed) / s.recv_window;
  if (s.recv_window < limits_.max_window &&
      elapsed < std::chrono::duration_cast<std::chrono::nanoseconds>(rtt * (4 * fraction))) {
    // Within the session's ceiling: what the other streams grew is not ours to take.
    std::uint64_t room = limits_.session_window_growth - window_growth_;
    std::uint32_t grown = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        {std::uint64_t{s.recv_window} * 2, limits_.max_window, std::uint64_t{s.recv_window} + room}));
    delta += grown - s.recv_window;
    window_growth_ += grown - s.recv_window;
    s.recv_window = grown;
  }
  s.epoch = now;
  s.consumed = 0;
  s.recv_credit += delta;
  return window_update(id, 0, delta);
}

FrameHeader MuxState::go_away(GoAwayCode code) {
  local_go_away_ = true;
  return FrameHeader{FrameType::go_away, 0, 0, static_cast<std::uint32_t>(code)};
}

Result<FrameHeader> MuxState::start_ping(SteadyTime now, std::uint32_t& id) {
  if (pings_.size() >= limits_.max_pings) return fail(errc::exhausted, "yamux: too many pings outstanding");
  id = next_ping_id_++;
  pings_[id] = now;
  return FrameHeader{FrameType::ping, flag::syn, 0, id};
}

KeepaliveAction MuxState::keepalive(SteadyTime now, std::vector<FrameHeader>& out) {
  if (keepalive_ping_sent_ && last_rx_ > keepalive_ping_at_) keepalive_ping_sent_ = false;
  if (keepalive_ping_sent_) {
    return now - keepalive_ping_at_ >= limits_.keepalive_timeout ? KeepaliveAction::dead
                                                                 : KeepaliveAction::none;
  }
  if (now - last_rx_ < limits_.keepalive_interval) return KeepaliveAction::none;
  keepalive_ping_sent_ = true;
  keepalive_ping_at_ = now;
  std::uint32_t id = 0;
  auto ping = start_ping(now, id);
  if (!ping) return KeepaliveAction::none;  // pings already outstanding: just wait for the timeout
  out.push_back(*ping);
  return KeepaliveAction::send_ping;
}

std::uint32_t MuxState::send_window(std::uint32_t id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? 0 : it->second.send_window;
}

std::uint32_t MuxState::recv_window_size(std::uint32_t id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? 0 : it->second.recv_window;
}

}  // namespace runsnack::yamux
