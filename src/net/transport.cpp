#include "net/transport.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace runsnack {

Transport::~Transport() = default;

namespace {

namespace asio = boost::asio;

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {
    boost::system::error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);  // the Mux coalesces itself
  }
  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer) override {
    co_return co_await socket_.async_read_some(buffer, asio::use_awaitable);
  }
  asio::awaitable<void> write(std::span<const asio::const_buffer> buffers) override {
    co_await asio::async_write(socket_, buffers, asio::use_awaitable);
  }
  asio::awaitable<void> shutdown(PeerWait) override {
    boost::system::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    co_return;
  }
  void close() override {
    boost::system::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
  void abandon() override {
    boost::system::error_code ignored;
    socket_.cancel(ignored);
  }
  asio::any_io_executor get_executor() override { return socket_.get_executor(); }

 private:
  asio::ip::tcp::socket socket_;
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(asio::ip::tcp::socket socket) {
  return std::make_unique<TcpTransport>(std::move(socket));
}

}  // namespace runsnack
