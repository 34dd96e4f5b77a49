// The offload pool (offload.hpp): owners take turns and one owner's jobs hold at most their share
// of the threads, stepped without threads (OffloadQueue) and then on the real pool.
#include "fs/offload.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

namespace runsnack::fs {
namespace {

class Named final : public OffloadJob {
 public:
  explicit Named(int id) : id(id) {}
  void run() override {}
  int id;
};

int id_of(const std::optional<OffloadQueue::Next>& n) { return n ? static_cast<Named&>(*n->job).id : -1; }

TEST(OffloadQueue, OneOwnersJobsRunAtMostTwoAtATimeAndOwnersTakeTurns) {
  OffloadQueue q(2);
  for (int i = 1; i <= 4; ++i) q.push("hog", std::make_unique<Named>(i));
  q.push("small", std::make_unique<Named>(10));
  EXPECT_EQ(id_of(q.next()), 1);
  EXPECT_EQ(id_of(q.next()), 10);  // the other owner's turn, not the hog's second job
  EXPECT_EQ(id_of(q.next()), 2);
  EXPECT_FALSE(q.next());  // the hog is at its two; its others wait however many threads are free
  EXPECT_EQ(q.running("hog"), 2u);
  EXPECT_EQ(q.waiting(), 2u);
  q.push("late", std::make_unique<Named>(20));
  EXPECT_EQ(id_of(q.next()), 20);  // a newcomer starts at once
  q.done("hog");
  EXPECT_EQ(id_of(q.next()), 3);
  q.done("small");
  q.done("late");
  EXPECT_FALSE(q.next());
  q.done("hog");
  q.done("hog");
  EXPECT_EQ(id_of(q.next()), 4);
  q.done("hog");
  EXPECT_EQ(q.running(), 0u);
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(OffloadQueue, TheProcesssOwnWorkIsNotLimitedPerOwner) {
  OffloadQueue q(2);
  for (int i = 1; i <= 3; ++i) q.push("", std::make_unique<Named>(i));
  EXPECT_EQ(id_of(q.next()), 1);
  EXPECT_EQ(id_of(q.next()), 2);
  EXPECT_EQ(id_of(q.next()), 3);
}

// On the real pool: two long jobs of one consumer (and a third queued behind them) do not keep
// another consumer's small job from running and returning its result.
TEST(Offload, AnotherConsumersJobRunsBesideOneConsumersLongJobs) {
  boost::asio::io_context io;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> hog_started{0};
  std::vector<int> hog_results;
  int small_result = 0;
  auto hog = [&](int i) -> boost::asio::awaitable<void> {
    hog_results.push_back(co_await offload(std::string("hog"), [&, i] {
      ++hog_started;
      released.wait();
      return i;
    }));
  };
  for (int i = 0; i < 3; ++i) boost::asio::co_spawn(io, hog(i), boost::asio::detached);
  boost::asio::co_spawn(io, [&]() -> boost::asio::awaitable<void> {
    // Runs while both of the hog's first jobs hold their threads.
    small_result = co_await offload(std::string("small"), [&] {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (hog_started.load() < 2 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return 6;
    });
    EXPECT_EQ(hog_started.load(), 2);  // the hog's third job still waits for its turn
    release.set_value();
  }, boost::asio::detached);
  io.run_for(std::chrono::seconds(30));
  EXPECT_EQ(small_result, 6);
  EXPECT_EQ(hog_results.size(), 3u);
  EXPECT_EQ(hog_started.load(), 3);
  EXPECT_LE(offload_workers().threads(), kOffloadThreads);
}

TEST(Offload, AnExceptionComesBackToTheCaller) {
  boost::asio::io_context io;
  bool caught = false;
  boost::asio::co_spawn(io, [&]() -> boost::asio::awaitable<void> {
    try {
      co_await offload([]() -> int { throw std::runtime_error("boom"); });
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "boom";
    }
    co_await offload([] {});  // void works too
  }, boost::asio::detached);
  io.run();
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace runsnack::fs
