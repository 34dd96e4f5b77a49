// The learned model on its own: speed posteriors converge to what devices
// really do, reliability and uptime counts move the estimates, state round-trips.
#include "pool/scheduling/estimator.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace runsnack::pool::scheduling {
namespace {

TEST(Estimator, SpeedConvergesToTheTrueSpeed) {
  Estimator est;
  // Work units: one unit takes 1 s on a device of score 1 (a_w = 0 in truth).
  for (std::uint32_t d = 0; d < 3; ++d) est.add_device(d, 10.0 * (d + 1));
  auto w = est.add_workload("render", 100, std::log(20.0));
  // Device 1's calibration says 20 but it runs at 8 (throttled); the others as calibrated.
  const double truth[3] = {10, 8, 30};
  Rng noise(7);
  for (int i = 0; i < 200; ++i)
    for (std::uint32_t d = 0; d < 3; ++d) {
      double work = 100 * std::exp(0.3 * noise.normal());  // sizes vary, the estimator is told 100
      est.observe_speed(d, w, 100, work / truth[d]);
    }
  for (std::uint32_t d = 0; d < 3; ++d)
    EXPECT_NEAR(est.task_seconds(d, w, 100), 100 / truth[d], 0.1 * 100 / truth[d]) << "device " << d;
  EXPECT_LT(est.offset_sd(1, w), 0.05);
}

TEST(Estimator, UncertaintyShrinksAndOtherWorkloadsInform) {
  Estimator est;
  est.add_device(0, 10);
  est.add_device(1, 10);
  auto a = est.add_workload("a", 10, std::log(10.0));
  auto b = est.add_workload("b", 10, std::log(10.0));
  double before = est.offset_sd(0, a);
  for (int i = 0; i < 20; ++i) {
    est.observe_speed(0, a, 10, 1.0);  // device 0 at the pool's speed
    est.observe_speed(1, a, 10, 4.0);  // device 1 four times slower
  }
  EXPECT_LT(est.offset_sd(0, a), before / 3);
  // Device 1 has never run `b`, but being slow on `a` makes it expected slower on `b` too.
  EXPECT_LT(est.relative_speed(1, b), est.relative_speed(0, b));
}

TEST(Estimator, ReliabilityAndUptime) {
  Estimator est;
  est.add_device(0, 1);
  est.add_device(1, 1);
  double prior = est.success_mean(0);
  for (int i = 0; i < 10; ++i) est.observe_failure(1);
  EXPECT_LT(est.success_mean(1), prior - 0.2);
  est.observe_success(0);
  est.observe_invalid(0, true);  // the success was a wrong result after all
  EXPECT_EQ(est.counts(0).ok, 0u);
  EXPECT_EQ(est.counts(0).invalid, 1u);
  double rate = est.departure_rate(0);
  est.observe_session(0, 600, true);
  est.observe_session(0, 600, true);
  EXPECT_GT(est.departure_rate(0), 2 * rate);
  est.observe_session(1, 100000, false);
  EXPECT_LT(est.departure_rate(1), rate / 10);
}

TEST(Estimator, SavedStateRestoresTheSameEstimates) {
  Estimator est;
  est.add_device(0, 5);
  auto w = est.add_workload("x", 50, std::log(5.0));
  est.observe_speed(0, w, 50, 7);
  est.observe_failure(0);
  est.observe_session(0, 1234, true);
  Estimator copy;
  ASSERT_TRUE(copy.load_workloads(est.save_workloads()));
  copy.add_device(0, 5);
  ASSERT_TRUE(copy.load_device(0, est.save_device(0)));
  EXPECT_EQ(copy.task_seconds(0, w, 50), est.task_seconds(0, w, 50));
  EXPECT_EQ(copy.success_mean(0), est.success_mean(0));
  EXPECT_EQ(copy.departure_rate(0), est.departure_rate(0));
  EXPECT_FALSE(copy.load_device(0, nlohmann::json{{"speed", "x"}}));
  EXPECT_FALSE(copy.load_workloads(nlohmann::json::object()));
}

}  // namespace
}  // namespace runsnack::pool::scheduling
