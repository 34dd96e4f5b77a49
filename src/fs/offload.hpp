#pragma once
// Consumer-sized work (walking and hashing a tree, reading and compressing
// file data for a transfer, making a workspace image) runs here, off the io
// thread that serves every session: a provider whose io thread hashed a
// 100 GiB file for one consumer would answer nobody else meanwhile.
//
// One pool per process, kOffloadThreads threads: at most that many such jobs
// run at once, the rest wait their turn (their coroutines wait, the io
// thread does not). offload(fn) runs fn on the pool and resumes the calling
// coroutine on its own executor with fn's result (an exception thrown by fn
// is rethrown there). fn must own what it uses or use only what outlives
// the caller's co_await (the caller's locals do: the coroutine waits).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace runsnack::fs {

// Shared by all sessions of a process; two is enough to keep one large job from holding up the rest.
inline constexpr std::size_t kOffloadThreads = 2;

boost::asio::thread_pool& offload_pool();

template <class F>
boost::asio::awaitable<std::invoke_result_t<F&>> offload(F fn) {
  using R = std::invoke_result_t<F&>;
  if constexpr (std::is_void_v<R>) {
    co_await boost::asio::co_spawn(
        offload_pool(), [&fn]() -> boost::asio::awaitable<void> { fn(); co_return; }, boost::asio::use_awaitable);
  } else {
    std::optional<R> result;
    co_await boost::asio::co_spawn(
        offload_pool(), [&fn, &result]() -> boost::asio::awaitable<void> { result.emplace(fn()); co_return; },
        boost::asio::use_awaitable);
    co_return std::move(*result);
  }
}

}  // namespace runsnack::fs
