#include "services/common/pacing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace runsnack {

namespace asio = boost::asio;

asio::awaitable<void> pace(TokenBucket* bucket, std::size_t n) {
  if (!bucket) co_return;
  auto wait = bucket->reserve(static_cast<std::int64_t>(n), TokenBucket::Clock::now());
  if (wait <= TokenBucket::Clock::duration::zero()) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor, wait);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace runsnack
