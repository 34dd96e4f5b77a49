#include "session/pending_auth.hpp"

#include "session/auth.hpp"
#include "session/message.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace runsnack {

namespace asio = boost::asio;

PendingAuth::PendingAuth(const asio::any_io_executor& ex) : signal_(ex, asio::steady_timer::time_point::max()) {}

void PendingAuth::settle(Result<std::string> result) {
  if (result_) return;
  result_ = std::move(result);
  signal_.cancel();
}

asio::awaitable<Result<std::string>> PendingAuth::wait() {
  if (!result_) co_await signal_.async_wait(asio::as_tuple(asio::use_awaitable));
  // Only settle() wakes the wait; woken without a result, the waiter was cancelled.
  if (!result_) co_return fail(errc::closed, "cancelled while waiting for the provider's answer");
  co_return *result_;
}

namespace {

class AnswerFirst final : public Transport {
 public:
  AnswerFirst(std::unique_ptr<Transport> inner, std::shared_ptr<PendingAuth> auth)
      : inner_(std::move(inner)), auth_(std::move(auth)) {}

  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer) override {
    if (!auth_->settled()) co_await read_answer();
    if (rest_at_ < rest_.size()) {
      const std::size_t n = std::min(buffer.size(), rest_.size() - rest_at_);
      std::memcpy(buffer.data(), rest_.data() + rest_at_, n);
      rest_at_ += n;
      if (rest_at_ == rest_.size()) rest_ = {};
      co_return n;
    }
    co_return co_await inner_->read_some(buffer);
  }
  asio::awaitable<void> write(std::span<const asio::const_buffer> buffers) override {
    co_await inner_->write(buffers);
  }
  asio::awaitable<void> shutdown(PeerWait wait) override { co_await inner_->shutdown(wait); }
  void close() override { inner_->close(); }
  void abandon() override { inner_->abandon(); }
  void trim() override { inner_->trim(); }
  asio::any_io_executor get_executor() override { return inner_->get_executor(); }

 private:
  // Reads until the answer is whole; what came after it is kept for the next reads.
  asio::awaitable<void> read_answer() {
    std::vector<std::uint8_t> got;
    std::uint8_t chunk[4096];
    for (;;) {
      if (got.size() >= kMessagePrefixBytes) {
        auto length = decode_message_length(std::span<const std::uint8_t, kMessagePrefixBytes>(got.data(), 4));
        if (!length) refuse(length.error());
        if (got.size() >= kMessagePrefixBytes + *length) {
          const auto body = std::span<const std::uint8_t>(got).subspan(kMessagePrefixBytes, *length);
          settle_with(decode_message_body(body));
          rest_.assign(got.begin() + static_cast<std::ptrdiff_t>(kMessagePrefixBytes + *length), got.end());
          co_return;
        }
      }
      std::size_t n = 0;
      try {
        n = co_await inner_->read_some(asio::buffer(chunk));
      } catch (const boost::system::system_error& e) {
        auth_->settle(fail(errc::closed, got.empty() ? "connection closed during the handshake (" + e.code().message() + ")"
                                                     : "connection closed in the middle of a message (" +
                                                           e.code().message() + ")"));
        throw;
      }
      got.insert(got.end(), chunk, chunk + n);
    }
  }

  void settle_with(Result<nlohmann::json> message) {
    if (!message) refuse(message.error());
    auto reply = parse_auth_reply(*message);
    if (!reply) refuse(reply.error());
    if (!reply->ok) refuse(Error(reply->code, "the provider refused: " + reply->reason));
    auth_->settle(reply->session_id);
  }

  [[noreturn]] void refuse(Error why) {
    auth_->settle(std::move(why));
    throw boost::system::system_error(asio::error::connection_refused, "the provider refused the grant proof");
  }

  std::unique_ptr<Transport> inner_;
  std::shared_ptr<PendingAuth> auth_;
  std::vector<std::uint8_t> rest_;
  std::size_t rest_at_ = 0;
};

}  // namespace

std::unique_ptr<Transport> answer_first(std::unique_ptr<Transport> inner, std::shared_ptr<PendingAuth> auth) {
  return std::make_unique<AnswerFirst>(std::move(inner), std::move(auth));
}

}  // namespace runsnack
