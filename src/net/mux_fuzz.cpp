// libFuzzer: a whole Mux session (yamux_session.hpp) fed arbitrary bytes as
// its peer, with a provider-like application on top: every stream it accepts
// reads a length-prefixed message of whatever length the peer announces (up
// to 32 MiB, through MuxStream::read_growing) and answers. The first input
// byte picks how the peer reads our replies: promptly, or never (its writes
// stall). Run under -rss_limit_mb (scripts/run-fuzzers): a peer that floods
// pings, announces huge messages on many streams or never reads must not
// make the session hold more than its bounds (docs/SECURITY.md), and the
// invariants below must hold.
#include "net/yamux_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <cstdlib>
#include <cstring>
#include <span>

namespace {

using namespace runsnack;
namespace asio = boost::asio;

// The peer: its bytes are the fuzz input, delivered in pieces whose sizes the
// input also picks; what we write is dropped, or never taken at all.
class FuzzTransport final : public Transport {
 public:
  FuzzTransport(asio::any_io_executor ex, std::span<const std::uint8_t> input, bool peer_reads)
      : ex_(ex), input_(input), peer_reads_(peer_reads), stall_(ex) {
    stall_.expires_at(asio::steady_timer::time_point::max());
  }
  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer) override {
    if (closed_ || input_.empty()) hang_up();
    // One byte sets the size of this piece (1..256 x 64 bytes), the rest is the piece.
    std::size_t piece = (std::size_t{input_[0]} + 1) * 64;
    input_ = input_.subspan(1);
    std::size_t n = std::min({piece, buffer.size(), input_.size()});
    if (n == 0) hang_up();
    std::memcpy(buffer.data(), input_.data(), n);
    input_ = input_.subspan(n);
    co_return n;
  }
  asio::awaitable<void> write(std::span<const asio::const_buffer> buffers) override {
    for (const auto& b : buffers) written_ += b.size();
    if (!peer_reads_) {  // the peer never reads: the write waits until close()
      co_await stall_.async_wait(asio::as_tuple(asio::use_awaitable));
      throw boost::system::system_error(asio::error::operation_aborted);
    }
    if (closed_) throw boost::system::system_error(asio::error::broken_pipe);
  }
  asio::awaitable<void> shutdown(PeerWait) override { co_return; }
  void close() override {
    closed_ = true;
    stall_.cancel();
  }
  asio::any_io_executor get_executor() override { return ex_; }

 private:
  // The input is over: the peer closes the connection, both ways.
  [[noreturn]] void hang_up() {
    close();
    throw boost::system::system_error(asio::error::eof);
  }

  asio::any_io_executor ex_;
  std::span<const std::uint8_t> input_;
  bool peer_reads_;
  bool closed_ = false;
  std::size_t written_ = 0;
  asio::steady_timer stall_;
};

constexpr std::size_t kMaxAnnounced = 32u << 20;  // as an fs control frame may

asio::awaitable<void> serve_stream(std::shared_ptr<Mux> mux, std::shared_ptr<MuxStream> stream) {
  std::uint8_t prefix[4];
  if (!co_await stream->read_exact(asio::buffer(prefix))) co_return;
  std::size_t n = (std::size_t{prefix[0]} << 24) | (std::size_t{prefix[1]} << 16) | (std::size_t{prefix[2]} << 8) | prefix[3];
  n = std::min(n, kMaxAnnounced);
  std::vector<std::uint8_t> body;
  auto r = co_await stream->read_growing(n, body);
  if (mux->message_bytes() > MuxConfig{}.message_budget) std::abort();
  if (r && body.size() != n) std::abort();
  static const char reply[] = "ok";
  if (co_await stream->write(asio::buffer(reply, 2))) (void)co_await stream->close_write();
}

asio::awaitable<void> accept_all(std::shared_ptr<Mux> mux) {
  for (;;) {
    auto s = co_await mux->accept_stream();
    if (!s) co_return;
    if (mux->stream_count() > MuxConfig{}.limits.max_streams) std::abort();
    asio::co_spawn(mux->get_executor(), serve_stream(mux, std::move(*s)), asio::detached);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  asio::io_context io(1);
  auto transport = std::make_unique<FuzzTransport>(io.get_executor(), std::span(data + 1, size - 1), data[0] & 1);
  MuxConfig config;
  config.write_timeout = std::chrono::milliseconds(20);  // a peer that never reads ends soon
  auto mux = Mux::create(std::move(transport), yamux::Role::server, config);
  asio::co_spawn(io, mux->run(), asio::detached);
  asio::co_spawn(io, accept_all(mux), asio::detached);
  io.run();
  if (!mux->is_closed()) std::abort();
  return 0;
}
