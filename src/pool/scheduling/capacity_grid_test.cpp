// Counting what better devices can finish within a horizon.
#include "pool/scheduling/capacity_grid.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool::scheduling {
namespace {

CapacityGrid::Member dev(double speed, double price = 1) { return {speed, price, 1.0, 0.0}; }

CapacityGrid::Query fast(double horizon, double threshold, double target = 1e9) {
  CapacityGrid::Query q;
  q.now = 100;
  q.horizon_s = horizon;
  q.unit_s = 10;  // 10 s at speed 1
  q.preference = Preference::fast;
  q.threshold = threshold;
  q.target = target;
  return q;
}

TEST(CapacityGrid, CountsIdleAndSoonFreeBetterDevices) {
  CapacityGrid g;
  g.set(0, dev(10));  // 1 s a task
  g.set(1, dev(10));
  g.set(2, dev(1));   // 10 s a task
  // Within 3 s, devices faster than a 5 s device: two idle ones, 3 tasks each.
  EXPECT_DOUBLE_EQ(g.capacity(fast(3, 5)), 6);
  g.set_busy(1, 102);  // free in 2 s: one more task by the horizon
  EXPECT_DOUBLE_EQ(g.capacity(fast(3, 5)), 4);
  g.set_busy(1, 110);  // not free in time
  EXPECT_DOUBLE_EQ(g.capacity(fast(3, 5)), 3);
  g.set_idle(1);
  auto q = fast(3, 5);
  q.exclude = 0;  // the asking device does not count itself
  EXPECT_DOUBLE_EQ(g.capacity(q), 3);
  // A threshold no device beats, and a target that stops the count early.
  EXPECT_DOUBLE_EQ(g.capacity(fast(3, 0.5)), 0);
  EXPECT_GE(g.capacity(fast(3, 5, 2)), 2);
  g.erase(0);
  EXPECT_DOUBLE_EQ(g.capacity(fast(3, 5)), 3);
  EXPECT_FALSE(g.contains(0));
}

TEST(CapacityGrid, ReliabilityWeightsCompletions) {
  CapacityGrid g;
  g.set(0, {10, 1, 0.5, 0.0});
  EXPECT_DOUBLE_EQ(g.capacity(fast(2, 100)), 1);  // two tasks, each good with 1/2
}

TEST(CapacityGrid, ParetoFrontDropsDominatedCells) {
  CapacityGrid g;
  g.set(0, dev(16, 2.0));   // fast, dear
  g.set(1, dev(9.5, 0.35)); // slower, cheap per task
  g.set(2, dev(2, 1.0));    // slow and dearer per task than the cheap one: dominated
  auto front = g.pareto_front(10);
  ASSERT_EQ(front.size(), 2u);
  EXPECT_LT(front[0].task_s, front[1].task_s);
  EXPECT_GT(front[0].cost_per_task, front[1].cost_per_task);
}

TEST(CapacityGrid, AveragesDoNotDependOnOrder) {
  CapacityGrid a, b;
  for (std::uint32_t i = 0; i < 5; ++i) a.set(i, {1.0 + 0.01 * i, 0.3 + 0.001 * i, 0.9, 1e-4 * i});
  for (std::uint32_t i = 5; i-- > 0;) b.set(i, {1.0 + 0.01 * i, 0.3 + 0.001 * i, 0.9, 1e-4 * i});
  a.set(9, dev(1.02, 0.3));
  a.erase(9);
  EXPECT_EQ(a.capacity(fast(100, 1e9)), b.capacity(fast(100, 1e9)));
  auto fa = a.pareto_front(10), fb = b.pareto_front(10);
  ASSERT_EQ(fa.size(), fb.size());
  for (std::size_t i = 0; i < fa.size(); ++i) EXPECT_EQ(fa[i].task_s, fb[i].task_s);
}

}  // namespace
}  // namespace runsnack::pool::scheduling
