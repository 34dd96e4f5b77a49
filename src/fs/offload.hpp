#pragma once
// Consumer-sized work (walking and hashing a tree, reading and compressing
// file data for a transfer, making a workspace image) runs here, off the io
// thread that serves every session: a provider whose io thread hashed a
// 100 GiB file for one consumer would answer nobody else meanwhile.
//
// One pool per process, at most kOffloadThreads threads (started as jobs come).
// A job has an owner: on a provider the consumer's PeerId. At most
// kOffloadThreadsPerOwner jobs of one owner run at once, the owner's others wait
// in its own queue, and owners take turns (offload_queue.hpp); jobs of the empty
// owner (the process's own, the consumer's CLI) are limited only by the pool. So
// two huge pulls of one consumer hold two threads, and another consumer's small
// cp starts on a third at once. Long jobs also end early where they look at
// their ReadBounds (read_bounds.hpp).
//
// offload(owner, fn) runs fn on the pool and resumes the calling coroutine on
// its own executor with fn's result (an exception thrown by fn is rethrown
// there); the executor counts as busy meanwhile. fn must own what it uses or use
// only what outlives the caller's co_await (the caller's locals do: the
// coroutine waits).

#include "fs/offload_queue.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace runsnack::fs {

// Threads in all: enough that two consumers' long jobs at their limit leave room for the rest.
inline constexpr std::size_t kOffloadThreads = 8;
// One consumer's jobs at once: one pull's scan and its sending, or two transfers.
inline constexpr std::size_t kOffloadThreadsPerOwner = 2;

class OffloadPool {
 public:
  OffloadPool(std::size_t max_threads, std::size_t per_owner) : max_threads_(max_threads), queue_(per_owner) {}
  OffloadPool(const OffloadPool&) = delete;
  OffloadPool& operator=(const OffloadPool&) = delete;
  // Runs what is queued, then joins the threads.
  ~OffloadPool();

  void post(const std::string& owner, std::unique_ptr<OffloadJob> job);
  std::size_t threads() const;

 private:
  void work();

  const std::size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  OffloadQueue queue_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;
  bool closing_ = false;
};

// The pool offload() uses.
OffloadPool& offload_workers();

// An asio execution context off the io thread, one thread, for timers and short handlers that
// must not wait behind consumers' jobs (the kept sync states' release timer). Not for file work.
boost::asio::thread_pool& offload_pool();

namespace detail {

// fn's result or exception, filled on the pool.
template <class R>
struct OffloadResult {
  std::optional<R> value;
  std::exception_ptr failed;
  template <class F>
  void fill(F& fn) {
    try {
      value.emplace(fn());
    } catch (...) {
      failed = std::current_exception();
    }
  }
  R take() {
    if (failed) std::rethrow_exception(failed);
    return std::move(*value);
  }
};
template <>
struct OffloadResult<void> {
  std::exception_ptr failed;
  template <class F>
  void fill(F& fn) {
    try {
      fn();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  void take() {
    if (failed) std::rethrow_exception(failed);
  }
};

// Runs fn into `result`, then hands the coroutine's handler back to its executor.
template <class F, class R, class Handler>
class OffloadJobFor final : public OffloadJob {
 public:
  OffloadJobFor(F& fn, OffloadResult<R>& result, Handler handler)
      : fn_(fn), result_(result), work_(boost::asio::get_associated_executor(handler)), handler_(std::move(handler)) {}
  void run() override {
    result_.fill(fn_);
    auto ex = work_.get_executor();
    boost::asio::post(ex, std::move(handler_));
    work_.reset();
  }

 private:
  F& fn_;
  OffloadResult<R>& result_;
  boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work_;
  Handler handler_;
};

}  // namespace detail

template <class F>
boost::asio::awaitable<std::invoke_result_t<F&>> offload(std::string owner, F fn) {
  using R = std::invoke_result_t<F&>;
  detail::OffloadResult<R> result;
  co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void()>(
      [&](auto handler) {
        using Handler = decltype(handler);
        offload_workers().post(owner,
                               std::make_unique<detail::OffloadJobFor<F, R, Handler>>(fn, result, std::move(handler)));
      },
      boost::asio::use_awaitable);
  co_return result.take();
}

// The process's own work (no owner).
template <class F>
boost::asio::awaitable<std::invoke_result_t<F&>> offload(F fn) {
  return offload(std::string(), std::move(fn));
}

}  // namespace runsnack::fs
