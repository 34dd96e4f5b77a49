#pragma once
// One yamux stream: a reliable, ordered, flow-controlled byte stream inside a
// Mux. Obtained from Mux::open_stream() / accept_stream(); shared_ptr because
// the Mux reaches it while data arrives.
//
// Same executor rules as the Mux (yamux_session.hpp). At most one read and
// one write in flight per stream. Destroying a stream before close_write()
// resets it (RST); after close_write() the stream ends with the peer's FIN
// and whatever it still sends is dropped. Every failure is a value: errc::closed
// (stream reset, written after close_write, or session ended), errc::timeout
// (session keepalive/write timeout).

#include "core/error.hpp"
#include "net/receive_queue.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace runsnack {

class Mux;

class MuxStream {
 public:
  MuxStream(std::shared_ptr<Mux> mux, std::uint32_t id);
  MuxStream(const MuxStream&) = delete;
  MuxStream& operator=(const MuxStream&) = delete;
  ~MuxStream();

  std::uint32_t id() const { return id_; }

  // Requested when the stream is reset (by either side) or its session ends, so that work done
  // for it off the io thread (fs/read_bounds.hpp) stops when its peer goes. Thread-safe.
  std::stop_token stop_token() const { return stop_.get_token(); }
  // Who is at the other end, as the code that accepted the stream named them (a provider: the
  // consumer's PeerId); "" when not named. Off-thread work for the stream is theirs (fs/offload.hpp).
  void set_peer_name(std::string name) { peer_name_ = std::move(name); }
  const std::string& peer_name() const { return peer_name_; }

  // Reads at least one byte; 0 means clean end of stream (the peer's FIN,
  // everything before it read).
  boost::asio::awaitable<Result<std::size_t>> read_some(boost::asio::mutable_buffer buffer);
  // Lends the received bytes instead of copying them out: waits as read_some
  // does, then returns views of up to `max_bytes` (at least 1) unread bytes, in order
  // (empty: clean end of stream). They stay valid until consume() or another
  // read; consume(n) then takes the first n of them.
  boost::asio::awaitable<Result<std::span<const boost::asio::const_buffer>>> read_view(std::size_t max_bytes);
  void consume(std::size_t n);
  // Fills `buffer` or fails (errc::closed on an early end of stream).
  boost::asio::awaitable<Result<void>> read_exact(boost::asio::mutable_buffer buffer);
  // Reads exactly `n` bytes into `out` (resized to n) for a message whose
  // length the peer announced: memory is allocated as the bytes arrive (at
  // most `upfront` before any do, then never more than twice what arrived),
  // and counted against the session's message budget until this returns
  // (MuxConfig::message_budget; errc::exhausted past it). So a peer that
  // announces big messages and sends nothing makes us hold nothing; one that
  // stops part-way fails the read after MuxConfig::message_stall (errc::timeout).
  boost::asio::awaitable<Result<void>> read_growing(std::size_t n, std::vector<std::uint8_t>& out,
                                                    std::size_t upfront = 64 * 1024);
  boost::asio::awaitable<Result<void>> read_growing(std::size_t n, std::string& out, std::size_t upfront = 64 * 1024);
  // Sends all of `buffer`; waits while the peer's window is exhausted (flow
  // control) and until the bytes are handed to the transport. `buffer` is
  // referenced, not copied, until this returns: do not cancel it part-way.
  boost::asio::awaitable<Result<void>> write(boost::asio::const_buffer buffer);
  // Half-close (FIN): the peer reads end of stream; we can still read.
  boost::asio::awaitable<Result<void>> close_write();
  // Abort both directions (RST). Pending reads and writes fail.
  void reset();

 private:
  friend class Mux;
  void deliver(const std::uint8_t* data, std::size_t n);  // from the Mux reader
  // From the Mux reader: a pool chunk whose [0, n) is the stream's next data.
  void deliver_chunk(ChunkPtr chunk, std::size_t n);
  std::size_t consumed(std::size_t n);  // the reader took n bytes: maybe a window update
  void on_remote_fin();
  void on_reset(Error why);
  Error session_end() const;  // why the session is ending: its close reason, else "closed"
  void wake_writer() { write_signal_.cancel(); }
  template <class Bytes>
  boost::asio::awaitable<Result<void>> read_growing_into(std::size_t n, Bytes& out, std::size_t upfront);

  std::shared_ptr<Mux> mux_;
  std::uint32_t id_;
  ReceiveQueue rx_;  // received, unread; bounded by our receive window
  std::vector<boost::asio::const_buffer> views_;  // what read_view lent
  // A read_some waiting with an empty rx_ gets the bytes straight into its
  // buffer (one copy less): read_into_ is that buffer while it waits,
  // read_direct_ how much deliver() has put there.
  boost::asio::mutable_buffer read_into_;
  std::size_t read_direct_ = 0;
  // While read_growing runs: a read_some waiting this long for a byte fails.
  std::chrono::steady_clock::duration stall_limit_{};
  bool remote_fin_ = false;
  bool local_fin_ = false;
  std::optional<Error> error_;  // reset or session ended
  std::stop_source stop_;       // requested with error_
  std::string peer_name_;
  boost::asio::steady_timer read_signal_;
  boost::asio::steady_timer write_signal_;
};

}  // namespace runsnack
