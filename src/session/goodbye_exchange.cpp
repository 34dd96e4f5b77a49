#include "session/goodbye_exchange.hpp"

#include "core/log_exceptions.hpp"
#include "session/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

namespace runsnack {

namespace asio = boost::asio;

namespace {

// Whether the exchange is over; its timer is cancelled then (it may be over before anyone waits).
struct Answer {
  Answer(const asio::any_io_executor& ex, std::chrono::milliseconds wait) : timer(ex, wait) {}
  asio::steady_timer timer;
  bool over = false;
};

// The goodbye and its answer; `answer` says when it is over, however it went. Not cancelled itself
// (a write cancelled part-way would leave its bytes referenced by the Mux's queue): the session's
// close ends what is still waiting.
asio::awaitable<void> exchange(std::shared_ptr<Mux> mux, Goodbye goodbye, std::shared_ptr<Answer> answer) {
  auto stream = co_await mux->open_stream();
  if (stream) {
    const nlohmann::json header = to_json(goodbye_header(goodbye));  // named: GCC 12 coroutine bug
    if (co_await write_stream_message(**stream, header)) {
      auto reply = co_await read_stream_message(**stream, kMaxGoodbyeBytes);
      if (!reply) spdlog::debug("goodbye: no answer: {}", reply.error().what());
    }
  }
  answer->over = true;
  answer->timer.cancel();
}

}  // namespace

asio::awaitable<void> say_goodbye(std::shared_ptr<Mux> mux, Goodbye goodbye, std::chrono::milliseconds wait) {
  auto ex = mux->get_executor();
  auto answer = std::make_shared<Answer>(ex, wait);
  asio::co_spawn(ex, exchange(mux, std::move(goodbye), answer), log_exceptions("goodbye"));
  if (!answer->over) (void)co_await answer->timer.async_wait(asio::as_tuple(asio::use_awaitable));  // or `wait`
  mux->close();
}

asio::awaitable<void> hear_goodbye(std::shared_ptr<Mux> mux, std::shared_ptr<HeardGoodbye> heard) {
  for (;;) {
    auto stream = co_await mux->accept_stream();
    if (!stream) co_return;  // the session ended
    auto msg = co_await read_stream_message(**stream, kMaxGoodbyeBytes);
    auto header = msg ? parse_stream_header(*msg) : Result<StreamHeader>(msg.error());
    auto goodbye = header ? parse_goodbye(*header) : Result<Goodbye>(header.error());
    if (!goodbye || heard->goodbye) {
      spdlog::debug("a stream from the provider refused: {}", goodbye ? "a second goodbye" : goodbye.error().what());
      (*stream)->reset();
      continue;
    }
    heard->goodbye = std::move(*goodbye);
    const nlohmann::json ok = to_json(StreamReply{true, errc::ok, ""});
    if (co_await write_stream_message(**stream, ok)) (void)co_await (*stream)->close_write();
  }
}

}  // namespace runsnack
