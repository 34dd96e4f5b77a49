#pragma once
// The yamux protocol logic without I/O (docs/ARCHITECTURE.md section 13, rule 3): the stream table,
// per-stream send and receive windows with receive-window auto-tuning,
// SYN/ACK/FIN/RST transitions, GoAway, ping ids and keepalive, and every limit
// on what a peer may make us hold. It is fed decoded headers and the current
// time and says what to do; the Mux (yamux_session.hpp) moves the bytes.
//
// Memory bounds (docs/SECURITY.md, "Protocol bounds and rendezvous"):
// - a stream's buffered-but-unread bytes never exceed the window we granted
//   (<= MuxLimits::max_window); a Data frame beyond it is a protocol error
//   that ends the connection (as HashiCorp's implementation does);
// - a session's windows sum to at most max_streams x initial_window (the
//   spec's implicit grant to every stream) plus session_window_growth, the
//   ceiling auto-tuning (and any later sizing of windows) grows them within;
// - pings are answered within a rate (ping_burst, pings_per_second): a peer
//   beyond it gets a GoAway;
// - our Data frames wait for min_send_frame of window (or the whole rest), so
//   a peer granting a few bytes at a time cannot make us queue a frame each.
// Not thread-safe; one owner.

#include "net/yamux_frame.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace runsnack::yamux {

using SteadyTime = std::chrono::steady_clock::time_point;

enum class Role { client, server };  // client opens odd stream ids, server even

struct MuxLimits {
  std::uint32_t initial_window = 256 * 1024;      // fixed by the spec
  std::uint32_t max_window = 16 * 1024 * 1024;    // receive-window auto-tuning ceiling per stream
  std::uint32_t max_frame = 256 * 1024;           // largest Data frame we send
  std::size_t max_streams = 1024;                 // open streams, both directions
  std::size_t accept_backlog = 256;               // incoming streams not yet accepted
  std::size_t max_pings = 64;                     // outstanding ping requests
  // What all streams' windows may grow by together beyond initial_window each.
  std::size_t session_window_growth = 64 * 1024 * 1024;
  std::uint32_t ping_burst = 256;        // pings answered at once ...
  std::uint32_t pings_per_second = 64;   // ... and after that; more is a flood (GoAway)
  std::uint32_t min_send_frame = 16 * 1024;  // silly-window avoidance (see above)
  // Below this the RTT is not trusted for auto-tuning: an idle-link RTT on
  // loopback (tens of microseconds) says nothing about a loaded one.
  std::chrono::microseconds min_tuning_rtt{1000};
  std::chrono::milliseconds keepalive_interval{2500};  // quiet time before we ping
  // Then no answer this long = dead: 15-16.25 s of silence in all (the Mux
  // checks every interval / 4). Counted from the ping, which may go out just
  // as a path outage begins: 12.5 s rides out a 10 s outage, whose TCP resumes
  // within ~1 s after (net/tcp_tuning.hpp), whichever side pinged last.
  std::chrono::milliseconds keepalive_timeout{12500};
};

// A reason the connection must end; the GoAway to send is already queued.
struct Fault {
  GoAwayCode code;
  const char* reason;  // static string, for the log
};

// What the I/O layer does for one received header. Several fields may be set
// (a Data frame with SYN|FIN opens, delivers and half-closes).
struct Inbound {
  std::uint32_t stream_id = 0;
  bool opened = false;            // new incoming stream: queue it for accept
  std::uint32_t deliver = 0;      // the next `deliver` payload bytes belong to the stream
  std::uint32_t discard = 0;      // the next `discard` payload bytes are to be skipped
  bool remote_fin = false;        // peer half-closed: readers see EOF after the buffer
  bool reset = false;             // stream is gone (peer RST or our RST because of this frame)
  bool send_window_grew = false;  // wake writers
  const char* stream_error = nullptr;  // why we reset the stream, for the log
  std::optional<std::uint32_t> pong;   // reply to our ping with this id
  std::optional<GoAwayCode> go_away;   // peer's GoAway
  std::optional<Fault> fault;          // end the connection
};

enum class KeepaliveAction { none, send_ping, dead };

class MuxState {
 public:
  MuxState(Role role, MuxLimits limits);

  // --- input from the peer. Replies (ACK to ping, RST, GoAway) are appended to `out`.
  Inbound on_frame(const FrameHeader& h, SteadyTime now, std::vector<FrameHeader>& out);

  // --- local stream operations
  // Opens a stream; returns its id. The SYN frame is appended to `out`.
  // Fails with errc::closed after a GoAway, errc::exhausted at max_streams or when ids run out.
  Result<std::uint32_t> open(std::vector<FrameHeader>& out);
  // The application took an incoming stream from the backlog; appends its ACK.
  void accepted(std::uint32_t id, std::vector<FrameHeader>& out);
  // Header for the next Data frame of up to `want` bytes, debiting the send
  // window. length 0: window exhausted, wait for send_window_grew.
  // Fails with errc::closed after close_write or reset.
  Result<FrameHeader> next_data(std::uint32_t id, std::size_t want);
  // FIN. Fails with errc::closed when already half-closed or gone.
  Result<FrameHeader> close_write(std::uint32_t id);
  // RST, forgetting the stream; nothing when the stream is already gone.
  std::optional<FrameHeader> reset(std::uint32_t id);
  // The application read `n` bytes of this stream: maybe a WindowUpdate
  // (sent once half the window is consumed; the window doubles when that
  // took under ~2 RTTs).
  std::optional<FrameHeader> consumed(std::uint32_t id, std::uint32_t n, SteadyTime now);

  // --- connection
  FrameHeader go_away(GoAwayCode code);  // no new incoming streams after this
  // Fails with errc::exhausted when max_pings are outstanding.
  Result<FrameHeader> start_ping(SteadyTime now, std::uint32_t& id);
  // A ping we stopped waiting for (timed out).
  void forget_ping(std::uint32_t id) { pings_.erase(id); }
  // Call on every byte received; drives keepalive.
  void note_activity(SteadyTime now) { last_rx_ = now; }
  KeepaliveAction keepalive(SteadyTime now, std::vector<FrameHeader>& out);
  // Latest ping RTT (zero before the first pong).
  std::chrono::microseconds rtt() const { return rtt_; }
  // Bytes the windows have grown beyond initial_window, all streams together.
  std::size_t window_growth() const { return window_growth_; }

  // --- inspection (tests, status)
  std::size_t stream_count() const { return streams_.size(); }
  bool has_stream(std::uint32_t id) const { return streams_.contains(id); }
  std::uint32_t send_window(std::uint32_t id) const;
  std::uint32_t recv_window_size(std::uint32_t id) const;  // current auto-tuned window
  bool remote_go_away() const { return remote_go_away_; }
  bool local_go_away() const { return local_go_away_; }

 private:
  struct Stream {
    bool incoming = false;
    bool accepted = false;   // incoming: the app took it (until then it counts in the backlog)
    bool acked = false;      // outgoing: peer sent ACK
    bool local_fin = false;
    bool remote_fin = false;
    std::uint32_t send_window = 0;
    std::uint32_t recv_window = 0;  // current window size we grant
    std::uint32_t recv_credit = 0;  // bytes the peer may still send
    std::uint32_t unread = 0;       // delivered, not yet consumed by the app
    std::uint32_t consumed = 0;     // consumed since our last WindowUpdate
    SteadyTime epoch{};             // start of the current auto-tuning period
  };

  Inbound on_stream_frame(const FrameHeader& h, SteadyTime now, std::vector<FrameHeader>& out);
  Inbound on_ping(const FrameHeader& h, SteadyTime now, std::vector<FrameHeader>& out);
  Inbound on_go_away(const FrameHeader& h, std::vector<FrameHeader>& out);
  Inbound fault(GoAwayCode code, const char* reason, std::vector<FrameHeader>& out);
  bool is_peer_id(std::uint32_t id) const;
  void forget(std::uint32_t id);
  void maybe_forget(std::uint32_t id, const Stream& s);

  Role role_;
  MuxLimits limits_;
  std::unordered_map<std::uint32_t, Stream> streams_;
  std::uint32_t next_id_;
  std::size_t backlog_ = 0;
  bool local_go_away_ = false;
  bool remote_go_away_ = false;
  std::unordered_map<std::uint32_t, SteadyTime> pings_;
  std::uint32_t next_ping_id_ = 1;
  double ping_tokens_ = 0;  // ping answers left in the bucket (refilled with time)
  std::optional<SteadyTime> ping_refill_;  // when the bucket was last topped up
  std::size_t window_growth_ = 0;
  std::chrono::microseconds rtt_{0};
  SteadyTime last_rx_{};
  bool keepalive_ping_sent_ = false;
  SteadyTime keepalive_ping_at_{};
};

}  // namespace runsnack::yamux
