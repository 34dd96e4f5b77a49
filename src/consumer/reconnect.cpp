#include "consumer/reconnect.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

namespace runsnack {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// How often a caller's stop flag is looked at while waiting.
constexpr std::chrono::milliseconds kStopCheck{50};
constexpr std::chrono::milliseconds kLongestWait{1000};

// What the attempts of one reconnect() share; each attempt holds it until its end.
struct Race {
  Race(ReconnectPolicy policy, Clock::time_point give_up, asio::any_io_executor ex) : plan(policy, give_up), wake(ex) {}
  ReconnectPlan plan;
  std::unique_ptr<Session> winner;
  asio::steady_timer wake;  // reconnect() waits on it; an attempt's end cancels it
  std::function<void(const Error&)> on_retry;
};

asio::awaitable<void> attempt(Consumer& consumer, Link link, ConnectOptions options, std::shared_ptr<Race> race) {
  auto session = co_await consumer.connect(link, options);
  if (session) {
    // A session made after the plan finished, or after another won, is not wanted: destroying it closes it.
    if (!race->plan.finished() && !race->plan.has_winner()) race->winner = std::move(*session);
    race->plan.won();
  } else {
    spdlog::debug("reconnect attempt: {}", session.error().what());
    race->plan.failed(session.error());
    if (race->on_retry && !race->plan.finished() && race->plan.retried(session.error()))
      race->on_retry(session.error());
  }
  race->wake.cancel();
}

}  // namespace

asio::awaitable<Result<std::unique_ptr<Session>>> reconnect(Consumer& consumer, const Link& link,
                                                            ReconnectOptions options) {
  auto ex = co_await asio::this_coro::executor;
  auto race = std::make_shared<Race>(options.policy, options.give_up, ex);
  race->on_retry = std::move(options.on_retry);
  ConnectOptions connect = options.connect;
  connect.timeout = std::min(connect.timeout, options.policy.attempt_timeout);
  // A raw pointer: the attempts hold `race` themselves; the check runs only inside one.
  connect.still_wanted = [r = race.get()] { return !r->plan.has_winner() && !r->plan.finished(); };
  for (;;) {
    const auto now = Clock::now();
    const auto step = race->plan.next(now, options.stop && *options.stop);
    if (step.action == ReconnectPlan::Action::finished) break;
    if (step.action == ReconnectPlan::Action::start_attempt) {
      // Owned by `race`, bounded by its timeout.
      asio::co_spawn(ex, attempt(consumer, link, connect, race), asio::detached);
      continue;
    }
    // Bounded, so a far give_up (time_point::max) never reaches the timer's arithmetic.
    race->wake.expires_at(std::min(step.until, now + (options.stop ? kStopCheck : kLongestWait)));
    co_await race->wake.async_wait(asio::as_tuple(asio::use_awaitable));  // cancelled: an attempt ended
  }
  if (race->winner) co_return std::move(race->winner);
  co_return race->plan.failure();
}

}  // namespace runsnack
