#include "cli/reconnect.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <optional>

namespace runsnack::cli {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// What the attempts of one reconnect() share; each attempt holds it until its end.
struct Race {
  std::unique_ptr<Session> winner;
  std::optional<Error> refusal;
  std::optional<Error> last_error;
  int running = 0;
  bool decided = false;  // reconnect() returned: a session made now is not wanted
};

asio::awaitable<void> attempt(Consumer& consumer, Link link, ConnectOptions options, std::shared_ptr<Race> race) {
  auto session = co_await consumer.connect(link, options);
  --race->running;
  if (session) {
    if (!race->decided && !race->winner) race->winner = std::move(*session);
    co_return;  // else: destroying the extra session closes it
  }
  spdlog::debug("reconnect attempt: {}", session.error().what());
  if (!transient_connect_error(session.error())) race->refusal = session.error();
  else race->last_error = session.error();
}

}  // namespace

bool transient_connect_error(const Error& e) {
  return e.is(errc::timeout) || e.is(errc::io_error) || e.is(errc::closed);
}

asio::awaitable<Result<std::unique_ptr<Session>>> reconnect(Consumer& consumer, const Link& link,
                                                            ConnectOptions options, Clock::time_point give_up,
                                                            const bool* stop) {
  auto ex = co_await asio::this_coro::executor;
  auto race = std::make_shared<Race>();
  options.timeout = std::min(options.timeout, kAttemptTimeout);
  // A raw pointer: the attempts hold `race` themselves; the check runs only inside one.
  options.still_wanted = [r = race.get()] { return !r->winner && !r->decided; };
  asio::steady_timer tick(ex);
  auto next = Clock::now();
  for (;;) {
    const auto now = Clock::now();
    if (race->winner || race->refusal || (stop && *stop) || now >= give_up) break;
    if (now >= next && race->running < kMaxAttempts) {
      ++race->running;
      asio::co_spawn(ex, attempt(consumer, link, options, race), asio::detached);  // owned by `race`, bounded by its timeout
      next = now + kAttemptEvery;
    }
    tick.expires_after(std::chrono::milliseconds(50));
    co_await tick.async_wait(asio::use_awaitable);
  }
  race->decided = true;
  if (race->winner) co_return std::move(race->winner);
  if (race->refusal) co_return *race->refusal;
  if (stop && *stop) co_return fail(errc::closed, "stopped");
  if (race->last_error) co_return *race->last_error;
  co_return fail(errc::timeout, "the provider could not be reached again");
}

}  // namespace runsnack::cli
