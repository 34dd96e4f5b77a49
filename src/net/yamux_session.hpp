#pragma once
// Mux: yamux (HashiCorp's spec) over one Transport: many MuxStreams over one
// TLS or TCP connection, each with its own flow control.
//
// Usage:
//   auto mux = Mux::create(make_tcp_transport(std::move(socket)), yamux::Role::client);
//   co_spawn(ex, mux->run(), on_done);   // the owner awaits or keeps this task
//   auto s = co_await mux->open_stream();
//
// Threads: a Mux, its streams and the Transport live on one executor (the
// transport's; a strand or a one-thread io_context). Every member function
// must be called from that executor; only bytes_in()/bytes_out() may be read
// from anywhere.
//
// Lifetime: Mux is shared (streams hold it); run() keeps it alive while it
// runs. run() owns the reader, writer and keepalive coroutines and returns
// only when all have finished: peer closed, GoAway received, protocol error,
// keepalive or write timeout, or close(). Then every stream, accept_stream()
// and ping() fails with errc::closed (or timeout).

#include "net/mux_stream.hpp"
#include "net/transport.hpp"
#include "net/yamux_state.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace runsnack {

struct MuxConfig {
  yamux::MuxLimits limits;  // windows, stream and backlog limits, keepalive
  // A gather write that has not completed by then means the peer stopped
  // reading; the connection is closed. Longer than a path outage a session
  // should survive (10 s, and the retransmission that follows it).
  std::chrono::milliseconds write_timeout{20000};
  // The read buffer starts at 16 KiB (idle sessions cost little) and doubles,
  // up to this, while reads fill it; frames are parsed many per read.
  std::size_t read_buffer_bytes = 256 * 1024;
  // Replies the peer made us queue (ping ACKs, RSTs) and we could not write
  // yet: past this we stop reading it until they are written (a peer that
  // floods without reading stalls itself, then meets write_timeout).
  std::size_t max_pending_replies = 1024;
  // Bytes of partly received messages the session's framed readers hold
  // together (MuxStream::read_growing): a peer announcing big messages on
  // many streams gets errc::exhausted on those past it.
  std::size_t message_budget = 64 * 1024 * 1024;
  // Once a framed message has started arriving, a read_growing that waits
  // this long for its next byte fails (errc::timeout): a peer that announces
  // a message and stalls, keeping the session alive, cannot hold the reader
  // (and what it allocated) forever. Longer than an outage a session rides out.
  std::chrono::milliseconds message_stall{60000};
  // A session given up for silence (keepalive or write timeout) leaves its connection open and
  // unused until the Mux is destroyed (Transport::abandon) instead of closing it. A consumer's
  // close would reach the provider as soon as the path is back, maybe before the new session's
  // re-attach, and a FIN there means the consumer ended (services/exec/detached_commands.hpp
  // then ends its command); left open, the provider sees only the silence and keeps the command.
  bool quiet_when_lost = false;
};

class Mux : public std::enable_shared_from_this<Mux> {
 public:
  static std::shared_ptr<Mux> create(std::unique_ptr<Transport> transport, yamux::Role role,
                                     MuxConfig config = {});
  Mux(const Mux&) = delete;
  Mux& operator=(const Mux&) = delete;
  ~Mux();

  // Runs the connection until it ends (see above). Call once.
  boost::asio::awaitable<void> run();

  // Fails with errc::closed once the session ends or after a GoAway,
  // errc::exhausted at the stream limit.
  boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_stream();
  // Waits for the peer to open a stream. Fails with errc::closed when the session ends.
  boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> accept_stream();
  // Round-trip time of one Ping. Fails with errc::timeout after the
  // keepalive timeout, errc::closed when the session ends.
  boost::asio::awaitable<Result<std::chrono::microseconds>> ping();
  // Sends GoAway(normal), flushes what is queued, ends the transport (waiting
  // for the peer's end as `wait` says), then closes. run() returns.
  void close(PeerWait wait = PeerWait::up_to_a_second);

  // Counts `n` more bytes of partly received messages against the session's
  // message_budget; false (nothing counted) when it would pass it.
  bool hold_message_bytes(std::size_t n);
  void release_message_bytes(std::size_t n) { message_bytes_ -= std::min(n, message_bytes_); }
  std::size_t message_bytes() const { return message_bytes_; }

  std::uint64_t bytes_in() const { return bytes_in_.load(std::memory_order_relaxed); }
  std::uint64_t bytes_out() const { return bytes_out_.load(std::memory_order_relaxed); }
  std::size_t stream_count() const { return state_.stream_count(); }
  // The last measured round-trip time (zero until the first ping's answer; run() sends one at once).
  std::chrono::microseconds rtt() const { return state_.rtt(); }
  // Ending or ended (a GoAway from either side, an error, close()): no new
  // streams; callers report the end. A peer's GoAway counts at once: a stream
  // opened just before it arrived is reset, and that reset is the session's end.
  bool is_closed() const { return done_ || closing_ || state_.remote_go_away(); }
  // Why the session ended (empty while it runs).
  std::optional<Error> close_reason() const { return close_reason_; }
  // The session ended without the peer saying so: it went silent (keepalive or write timeout), or
  // its connection broke or ended without TLS close_notify, and no GoAway came first. A fault, not
  // an end: the peer may still be there, and a new session can carry on (cli/cmd_run.cpp
  // re-attaches). False after a GoAway or close_notify from the peer, close(), a protocol error,
  // or a refused grant proof.
  bool lost() const { return lost_ && !state_.remote_go_away(); }
  boost::asio::any_io_executor get_executor() { return executor_; }

 private:
  friend class MuxStream;
  struct OutFrame {
    yamux::EncodedHeader header;
    boost::asio::const_buffer payload;
    bool reply = false;  // answers a peer's frame (counts in pending_replies_)
  };
  struct PingWait {
    boost::asio::steady_timer timer;
    bool answered = false;
  };

  Mux(std::unique_ptr<Transport> transport, yamux::Role role, MuxConfig config);

  boost::asio::awaitable<void> reader();
  boost::asio::awaitable<void> writer();
  boost::asio::awaitable<void> keepalive();
  // Parses buffered input; false when the session must end.
  bool process_input();
  // After a read straight into `chunk` of n bytes of the current payload.
  void deliver_direct(ChunkPtr chunk, std::size_t n);
  bool handle_frame(const yamux::FrameHeader& h);
  std::uint64_t enqueue(const yamux::FrameHeader& h, boost::asio::const_buffer payload = {}, bool reply = false);
  void flush_control(bool replies = false);  // enqueues ctrl_ (the state machine's frames)
  // Starts ending the session: graceful flushes the queue (with a GoAway) first.
  void begin_close(Error reason, bool graceful);
  // The peer went silent (keepalive or write timeout): ends the session as lost and stops the
  // transport (closed, or abandoned with quiet_when_lost) so that a read or write that would
  // never finish does.
  void give_up(Error reason);
  void stop_transport();
  void finish();  // transport closed: fail every stream and waiter

  std::unique_ptr<Transport> transport_;
  boost::asio::any_io_executor executor_;
  MuxConfig config_;
  yamux::MuxState state_;
  std::vector<yamux::FrameHeader> ctrl_;
  ChunkPool chunks_;  // streams' receive chunks; before the streams it outlives

  std::unordered_map<std::uint32_t, MuxStream*> streams_;  // weak: a stream removes itself
  std::deque<std::shared_ptr<MuxStream>> accept_queue_;
  std::unordered_map<std::uint32_t, PingWait*> pings_;

  std::deque<OutFrame> queue_;
  std::vector<boost::asio::const_buffer> gather_;
  std::size_t pending_replies_ = 0;  // OutFrame::reply frames queued, not yet written
  std::size_t message_bytes_ = 0;    // held by read_growing() calls in progress
  std::uint64_t queued_seq_ = 0;   // frames ever queued
  std::uint64_t flushed_seq_ = 0;  // frames ever written
  std::optional<std::chrono::steady_clock::time_point> write_since_;
  std::uint64_t moved_at_last_tick_ = 0;  // bytes in + out at the last keepalive tick
  bool trimmed_ = false;                  // transport trimmed since traffic last moved

  std::unique_ptr<std::uint8_t[]> in_;  // read buffer, not zeroed
  std::size_t in_size_ = 0, in_begin_ = 0, in_end_ = 0;
  bool in_grow_ = false;  // the last read filled it
  std::uint32_t payload_stream_ = 0;  // the Data payload being received
  std::uint32_t payload_left_ = 0;
  bool payload_deliver_ = false;
  bool direct_ = false;  // the last read put a bulk payload straight into a chunk

  // Signals: a timer that never expires, cancelled to wake its waiters.
  boost::asio::steady_timer writer_signal_;
  boost::asio::steady_timer flushed_signal_;
  boost::asio::steady_timer accept_signal_;
  boost::asio::steady_timer keepalive_timer_;

  bool run_called_ = false;
  bool closing_ = false;
  bool graceful_ = false;
  PeerWait close_wait_ = PeerWait::up_to_a_second;
  bool done_ = false;
  bool lost_ = false;    // see lost()
  bool silent_ = false;  // given up for silence (give_up)
  std::optional<Error> close_reason_;
  std::atomic<std::uint64_t> bytes_in_{0};
  std::atomic<std::uint64_t> bytes_out_{0};
};

}  // namespace runsnack
