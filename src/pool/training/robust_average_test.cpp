// Sample-weighted averaging with norm clipping and a coordinate-wise trimmed mean.
#include "pool/training/robust_average.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace runsnack::pool::training {
namespace {

Weights vec(std::vector<float> v) {
  Weights w;
  w.tensors["w"] = {{static_cast<std::int64_t>(v.size())}, std::move(v)};
  return w;
}

const std::vector<float>& values(const Result<Weights>& w) { return w.value().tensors.at("w").values; }

constexpr double kNoClip = 1e9;  // a median so large that nothing is clipped

TEST(RobustAverage, WeightedBySamples) {
  const auto reference = vec({0, 10});
  const auto a = vec({1, 10}), b = vec({4, 12});
  const Contribution updates[] = {{&a, 1}, {&b, 3}};
  auto avg = robust_average(reference, updates, kNoClip);
  ASSERT_TRUE(avg) << avg.error().message;
  EXPECT_EQ(values(avg), (std::vector<float>{3.25f, 11.5f}));  // (1*1 + 4*3) / 4, 10 + (0 + 2*3) / 4
}

TEST(RobustAverage, KeepsTheReferencesMetadataAndShape) {
  auto reference = vec({0});
  reference.metadata["round"] = "7";
  const Contribution updates[] = {{&reference, 5}};
  auto avg = robust_average(reference, updates, 1.0);
  ASSERT_TRUE(avg);
  EXPECT_EQ(*avg, reference);
}

TEST(RobustAverage, ClipsADeltaToClipTimesTheMedian) {
  const auto reference = vec({0, 0});
  const auto big = vec({3, 4}), small = vec({0, 1});  // norms 5 and 1
  const Contribution updates[] = {{&big, 1}, {&small, 1}};
  // Median 1, clip 2x: the big delta becomes (1.2, 1.6); the small one is untouched.
  auto avg = robust_average(reference, updates, 1.0);
  ASSERT_TRUE(avg);
  EXPECT_FLOAT_EQ(values(avg)[0], 0.6f);
  EXPECT_FLOAT_EQ(values(avg)[1], 1.3f);
  auto wider = robust_average(reference, updates, 1.0, {.clip_over_median = 5.0});
  EXPECT_EQ(values(wider), (std::vector<float>{1.5f, 2.5f}));
}

TEST(RobustAverage, OnePoisonedUpdateMovesTheAverageBoundedly) {
  const auto reference = vec({0, 0});
  const auto h1 = vec({1, 0}), h2 = vec({0.9f, 0.1f}), h3 = vec({1.1f, -0.1f});
  const auto poisoned = vec({-100, 0});  // sign flipped and x100
  const Contribution updates[] = {{&h1, 1}, {&h2, 1}, {&h3, 1}, {&poisoned, 1}};
  auto avg = robust_average(reference, updates, 1.0);
  ASSERT_TRUE(avg);
  // Honest mean 1.0; the poisoned delta counts as -2 at most: (3 - 2) / 4.
  EXPECT_NEAR(values(avg)[0], 0.25, 1e-6);
  // Trimming a quarter at each end drops it from the first coordinate altogether.
  auto trimmed = robust_average(reference, updates, 1.0, {.trim_fraction = 0.25});
  EXPECT_NEAR(values(trimmed)[0], 0.95, 1e-6);  // mean of 0.9 and 1.0
  EXPECT_NEAR(values(trimmed)[1], 0.0, 1e-6);   // mean of 0 and 0
}

TEST(RobustAverage, TrimmedMeanIsPerCoordinateAndWeighted) {
  const auto reference = vec({0, 0});
  const auto a = vec({1, 40}), b = vec({2, 30}), c = vec({3, 20}), d = vec({100, 10});
  const Contribution updates[] = {{&a, 1}, {&b, 1}, {&c, 3}, {&d, 1}};
  auto avg = robust_average(reference, updates, kNoClip, {.trim_fraction = 0.25});
  ASSERT_TRUE(avg);
  // First coordinate keeps 2 (weight 1) and 3 (weight 3); the second keeps 30 (1) and 20 (3).
  EXPECT_EQ(values(avg), (std::vector<float>{2.75f, 22.5f}));
  // Under a quarter of 4 updates nothing is dropped.
  auto plain = robust_average(reference, updates, kNoClip, {.trim_fraction = 0.2});
  EXPECT_FLOAT_EQ(values(plain)[0], (1 + 2 + 9 + 100) / 6.0f);
}

TEST(RobustAverage, RefusesWhatItCannotAverage) {
  const auto reference = vec({0});
  const auto a = vec({1});
  const auto nan = vec({std::numeric_limits<float>::quiet_NaN()});
  const auto other = vec({1, 2});
  EXPECT_TRUE(robust_average(reference, {}, 1).error().is(errc::invalid_argument));
  const Contribution no_samples[] = {{&a, 0}};
  EXPECT_TRUE(robust_average(reference, no_samples, 1).error().is(errc::invalid_argument));
  const Contribution one[] = {{&a, 1}};
  EXPECT_FALSE(robust_average(reference, one, 1, {.trim_fraction = 0.5}));
  EXPECT_FALSE(robust_average(reference, one, 1, {.clip_over_median = 0}));
  EXPECT_FALSE(robust_average(reference, one, -1));
  const Contribution bad[] = {{&a, 1}, {&nan, 1}};
  EXPECT_EQ(robust_average(reference, bad, 1).error().message,
            "update 1: tensor 'w': value 0 is NaN (did training diverge?)");
  const Contribution reshaped[] = {{&other, 1}};
  EXPECT_TRUE(robust_average(reference, reshaped, 1).error().is(errc::malformed));
}

}  // namespace
}  // namespace runsnack::pool::training
