#pragma once
// A connected byte stream the Mux runs over: plain TCP or TLS over TCP.
//
// Errors: read_some and write throw boost::system::system_error (end of
// stream is boost::asio::error::eof), as Asio's use_awaitable does; the Mux
// catches them where it spawned its reader and writer. Each Transport owns its
// socket. Not thread-safe: use it from coroutines on get_executor() only, with
// at most one read and one write in flight.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace boost::asio::ssl {
template <typename Stream>
class stream;
}  // namespace boost::asio::ssl

namespace runsnack {

// How a graceful end waits for the peer: up to ~1 s for its close_notify (so
// that a peer still sending cannot turn our close into a reset that loses our
// last bytes), or not at all (a consumer whose command is over: the last
// answer is in, and a wait would add a round trip to every command).
enum class PeerWait { up_to_a_second, none };

class Transport {
 public:
  virtual ~Transport();
  // Reads at least one byte.
  virtual boost::asio::awaitable<std::size_t> read_some(boost::asio::mutable_buffer buffer) = 0;
  // Writes all of `buffers`, in order, as one gather write.
  virtual boost::asio::awaitable<void> write(std::span<const boost::asio::const_buffer> buffers) = 0;
  // Graceful end after the last write: TLS close_notify (then waiting as
  // `wait` says for the peer's) and TCP FIN. Never throws.
  virtual boost::asio::awaitable<void> shutdown(PeerWait wait) = 0;
  // Closes now: pending operations fail. Idempotent.
  virtual void close() = 0;
  // Pending operations fail and the connection is left alone: no close_notify, FIN or reset goes
  // out until the Transport is destroyed (the socket closes then). For a session given up for
  // silence whose peer must not read it as our end yet (MuxConfig::quiet_when_lost). Idempotent.
  virtual void abandon() { close(); }
  // The connection has been quiet for a while: free buffers grown for bulk
  // transfers (they grow again when needed). The Mux calls it.
  virtual void trim() {}
  virtual boost::asio::any_io_executor get_executor() = 0;
};

std::unique_ptr<Transport> make_tcp_transport(boost::asio::ip::tcp::socket socket);
std::unique_ptr<Transport> make_tls_transport(
    std::unique_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> stream);

}  // namespace runsnack
