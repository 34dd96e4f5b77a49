#include "path_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace netlab {
namespace {

constexpr Nanos kMs = 1'000'000;

TEST(PathModel, PlainPathDeliversAtOnce) {
  PathModel m(PathParams{}, 1);
  auto d = m.admit(5 * kMs, 1514);
  EXPECT_EQ(d.fate, Fate::deliver);
  EXPECT_EQ(d.release_at, 5 * kMs);
}

TEST(PathModel, DelayIsAddedOneWay) {
  PathParams p;
  p.delay_ms = 20;
  PathModel m(p, 1);
  EXPECT_EQ(m.admit(0, 100).release_at, 20 * kMs);
  EXPECT_EQ(m.admit(3 * kMs, 100).release_at, 23 * kMs);
}

TEST(PathModel, BottleneckSendsOneFrameAfterAnother) {
  PathParams p;
  p.rate_mbit = 12;  // 1500 bytes = 12000 bits = 1 ms
  p.delay_ms = 10;
  p.burst_ms = 0;
  PathModel m(p, 1);
  EXPECT_EQ(m.admit(0, 1500).release_at, 11 * kMs);
  EXPECT_EQ(m.admit(0, 1500).release_at, 12 * kMs);
  EXPECT_EQ(m.admit(0, 1500).release_at, 13 * kMs);
  // An idle link sends at once again.
  EXPECT_EQ(m.admit(100 * kMs, 1500).release_at, 111 * kMs);
}

TEST(PathModel, IdleTimeIsCreditedUpToTheBurst) {
  PathParams p;
  p.rate_mbit = 12;  // 1 ms per 1500-byte frame
  p.burst_ms = 2;
  PathModel m(p, 1);
  // Idle since 0: frames read at 100 ms may count as sent from 98 ms on, so the
  // first three go out together (each at least its own 1 ms of sending after it
  // came), and the fourth waits for the link.
  EXPECT_EQ(m.admit(100 * kMs, 1500).release_at, 101 * kMs);
  EXPECT_EQ(m.admit(100 * kMs, 1500).release_at, 101 * kMs);
  EXPECT_EQ(m.admit(100 * kMs, 1500).release_at, 101 * kMs);
  EXPECT_EQ(m.admit(100 * kMs, 1500).release_at, 102 * kMs);
}

TEST(PathModel, CreditNeverMakesAFrameEarly) {
  PathParams p;
  p.rate_mbit = 12;  // 1 ms per 1500-byte frame
  p.delay_ms = 0.25;
  p.burst_ms = 1;
  PathModel m(p, 1);
  EXPECT_EQ(m.admit(50 * kMs, 1500).release_at, 50 * kMs + kMs + kMs / 4);
  EXPECT_EQ(m.admit(80 * kMs, 150).release_at, 80 * kMs + kMs / 10 + kMs / 4);
}

TEST(PathModel, FullBufferDropsTheTail) {
  PathParams p;
  p.rate_mbit = 12;
  p.queue_ms = 5;  // five 1 ms frames may wait
  PathModel m(p, 1);
  int delivered = 0, dropped = 0;
  for (int i = 0; i < 20; ++i) {
    auto d = m.admit(0, 1500);
    (d.fate == Fate::deliver ? delivered : dropped)++;
    if (d.fate != Fate::deliver) {
      EXPECT_EQ(d.fate, Fate::queue_full);
    }
  }
  EXPECT_EQ(delivered, 6);  // waiting 0..5 ms
  EXPECT_EQ(dropped, 14);
}

TEST(PathModel, ThroughputMatchesTheRate) {
  PathParams p;
  p.rate_mbit = 50;
  // Offered 121 Mbit/s: what gets through is the rate, the rest is dropped.
  const int frames = 10000;
  PathModel n(p, 1);
  std::uint64_t bytes = 0;
  Nanos end = 0;
  for (int i = 0; i < frames; ++i) {
    auto d = n.admit(static_cast<Nanos>(i) * 100'000, 1514);
    if (d.fate == Fate::deliver) bytes += 1514, end = d.release_at;
  }
  const double mbit = static_cast<double>(bytes) * 8 / (static_cast<double>(end) / 1e9) / 1e6;
  EXPECT_NEAR(mbit, 50.0, 0.5);
}

TEST(PathModel, IndependentLossHasTheConfiguredRate) {
  PathParams p;
  p.loss = 0.02;
  PathModel m(p, 7);
  int lost = 0, bursts = 0;
  bool prev = false;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    bool l = m.admit(i, 100).fate == Fate::lost;
    lost += l;
    bursts += l && !prev;
    prev = l;
  }
  EXPECT_NEAR(lost / double(n), 0.02, 0.002);
  EXPECT_NEAR(lost / double(bursts), 1.0 / 0.98, 0.05);  // geometric: bursts of 1 mostly
}

TEST(PathModel, BurstyLossKeepsTheRateAndMakesBursts) {
  PathParams p;
  p.loss = 0.02;
  p.loss_burst = 4;
  PathModel m(p, 7);
  int lost = 0, bursts = 0;
  bool prev = false;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    bool l = m.admit(i, 100).fate == Fate::lost;
    lost += l;
    bursts += l && !prev;
    prev = l;
  }
  EXPECT_NEAR(lost / double(n), 0.02, 0.003);
  EXPECT_NEAR(lost / double(bursts), 4.0, 0.4);
}

TEST(PathModel, JitterSpreadsDelaysButKeepsOrder) {
  PathParams p;
  p.delay_ms = 20;
  p.jitter_ms = 10;
  PathModel m(p, 3);
  Nanos prev = 0, lo = 1'000'000 * kMs, hi = 0;
  for (int i = 0; i < 5000; ++i) {
    const Nanos at = static_cast<Nanos>(i) * 30 * kMs;  // far apart: the order rule never applies
    auto d = m.admit(at, 100);
    ASSERT_EQ(d.fate, Fate::deliver);
    ASSERT_GE(d.release_at, prev);
    prev = d.release_at;
    lo = std::min(lo, d.release_at - at);
    hi = std::max(hi, d.release_at - at);
  }
  EXPECT_GE(lo, 10 * kMs);
  EXPECT_LT(lo, 11 * kMs);
  EXPECT_LE(hi, 30 * kMs);
  EXPECT_GT(hi, 29 * kMs);
  // Back to back: a later frame never overtakes an earlier one.
  prev = 0;
  for (int i = 0; i < 5000; ++i) {
    auto d = m.admit(1'000'000 * kMs + i * 10'000, 100);
    ASSERT_GE(d.release_at, prev);
    prev = d.release_at;
  }
}

TEST(PathModel, ReorderHoldsSomeFramesBack) {
  PathParams p;
  p.delay_ms = 10;
  p.reorder = 0.1;
  p.reorder_ms = 3;
  PathModel m(p, 5);
  int held = 0;
  for (int i = 0; i < 10000; ++i) {
    const Nanos at = static_cast<Nanos>(i) * kMs / 10;
    auto d = m.admit(at, 100);
    if (d.reordered) {
      ++held;
      EXPECT_GE(d.release_at, at + 13 * kMs);
      // the next in-order frame comes out before it
      auto next = m.admit(at + 1, 100);
      if (!next.reordered) {
        EXPECT_LT(next.release_at, d.release_at);
      }
    }
  }
  EXPECT_NEAR(held / 10000.0, 0.1, 0.02);
}

TEST(PathModel, BlackholeLosesEverythingUntilItEnds) {
  PathParams p;
  p.delay_ms = 5;
  PathModel m(p, 1);
  m.blackhole_until(10 * kMs);
  EXPECT_EQ(m.admit(0, 100).fate, Fate::outage);
  EXPECT_EQ(m.admit(9 * kMs, 100).fate, Fate::outage);
  EXPECT_TRUE(m.in_outage(9 * kMs));
  EXPECT_FALSE(m.in_outage(10 * kMs));
  EXPECT_EQ(m.admit(10 * kMs, 100).fate, Fate::deliver);
}

TEST(PathModel, NewParametersApplyToLaterFrames) {
  PathParams p;
  p.delay_ms = 5;
  PathModel m(p, 1);
  EXPECT_EQ(m.admit(0, 100).release_at, 5 * kMs);
  p.delay_ms = 40;
  m.set_params(p);
  EXPECT_EQ(m.admit(kMs, 100).release_at, 41 * kMs);
}

}  // namespace
}  // namespace netlab
