#include "pool/stall_watch.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

using namespace std::chrono_literals;

StallWatch::JobView view(const std::string& job, std::int64_t pending, std::int64_t running, std::int64_t placeable,
                         std::int64_t workers) {
  return {job, pending, running, placeable, workers};
}

TEST(StallWatch, WhatIsStuck) {
  EXPECT_TRUE(StallWatch::stuck(view("j", 1, 0, 0, 2)));   // a copy nobody online may run
  EXPECT_FALSE(StallWatch::stuck(view("j", 1, 1, 0, 2)));  // something still runs: it may decide the shard
  EXPECT_FALSE(StallWatch::stuck(view("j", 1, 0, 1, 2)));  // someone may take it
  EXPECT_FALSE(StallWatch::stuck(view("j", 1, 0, 0, 0)));  // no worker at all: waiting for one to join
  EXPECT_FALSE(StallWatch::stuck(view("j", 0, 0, 0, 2)));  // nothing pending
}

TEST(StallWatch, GivesUpOnlyAfterTheJobStayedStuck) {
  StallWatch w(10s);
  EXPECT_TRUE(w.step({view("j", 1, 0, 0, 1)}, 1000).empty());
  EXPECT_TRUE(w.step({view("j", 1, 0, 0, 1)}, 10'999).empty());
  EXPECT_EQ(w.step({view("j", 1, 0, 0, 1)}, 11'000), std::vector<std::string>{"j"});
}

TEST(StallWatch, ProgressStartsTheClockOver) {
  StallWatch w(10s);
  EXPECT_TRUE(w.step({view("j", 1, 0, 0, 1)}, 0).empty());
  EXPECT_TRUE(w.step({view("j", 1, 1, 0, 1)}, 9000).empty());  // a lease: it moved
  EXPECT_TRUE(w.step({view("j", 1, 0, 0, 1)}, 12'000).empty());
  EXPECT_TRUE(w.step({view("j", 1, 0, 0, 1)}, 21'999).empty());
  EXPECT_EQ(w.step({view("j", 1, 0, 0, 1)}, 22'000), std::vector<std::string>{"j"});
}

TEST(StallWatch, JobsAreWatchedApartAndForgottenWhenGone) {
  StallWatch w(5s);
  EXPECT_TRUE(w.step({view("a", 1, 0, 0, 1), view("b", 2, 0, 2, 1)}, 0).empty());
  EXPECT_TRUE(w.step({view("b", 2, 0, 0, 1)}, 3000).empty());  // "a" ended; "b" stuck from now
  EXPECT_TRUE(w.step({view("a", 1, 0, 0, 1), view("b", 2, 0, 0, 1)}, 6000).empty());  // "a" again: a new clock
  EXPECT_EQ(w.step({view("a", 1, 0, 0, 1), view("b", 2, 0, 0, 1)}, 8000), std::vector<std::string>{"b"});
}

}  // namespace
}  // namespace runsnack::pool
