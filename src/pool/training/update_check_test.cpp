// Checks of one update: layout, finite values, norm against the median, and agreement with a re-run.
#include "pool/training/update_check.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace runsnack::pool::training {
namespace {

Weights two(std::vector<float> a, std::vector<float> b) {
  Weights w;
  w.tensors["a"] = {{static_cast<std::int64_t>(a.size())}, std::move(a)};
  w.tensors["b"] = {{static_cast<std::int64_t>(b.size())}, std::move(b)};
  return w;
}

TEST(UpdateCheck, NormOfTheDelta) {
  const auto reference = two({1, 1}, {2});
  auto norm = update_norm(reference, two({4, 5}, {2}));  // delta (3, 4, 0)
  ASSERT_TRUE(norm) << norm.error().message;
  EXPECT_DOUBLE_EQ(*norm, 5.0);
  EXPECT_DOUBLE_EQ(update_norm(reference, reference).value(), 0.0);
}

TEST(UpdateCheck, LayoutMustMatchTheReference) {
  const auto reference = two({0, 0}, {0});
  Weights missing = reference;
  missing.tensors.erase("b");
  EXPECT_EQ(update_norm(reference, missing).error().message,
            "update has no tensor 'b' (the round's weights have 2 tensors)");
  Weights extra = reference;
  extra.tensors["c"] = {{1}, {0}};
  EXPECT_EQ(update_norm(reference, extra).error().message,
            "update has tensor 'c' that the round's weights do not have");
  Weights reshaped = reference;
  reshaped.tensors["a"] = {{1, 2}, {0, 0}};
  auto r = update_norm(reference, reshaped);
  EXPECT_EQ(r.error().message, "tensor 'a': shape [1, 2] but the round's weights have [2]");
  EXPECT_TRUE(r.error().is(errc::malformed));
}

TEST(UpdateCheck, NonFiniteValuesAreRefusedByTensorAndIndex) {
  const auto reference = two({0, 0}, {0});
  auto nan = update_norm(reference, two({0, std::numeric_limits<float>::quiet_NaN()}, {0}));
  EXPECT_EQ(nan.error().message, "tensor 'a': value 1 is NaN (did training diverge?)");
  auto inf = update_norm(reference, two({0, 0}, {-std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(inf.error().message, "tensor 'b': value 0 is infinite (did training diverge?)");
}

TEST(UpdateCheck, Median) {
  EXPECT_EQ(median_norm({}), 0);
  EXPECT_EQ(median_norm({3}), 3);
  EXPECT_EQ(median_norm({5, 1, 3}), 3);
  EXPECT_EQ(median_norm({4, 1, 100, 2}), 3);  // (2 + 4) / 2
}

TEST(UpdateCheck, NormAboveKTimesTheMedianIsRefused) {
  EXPECT_TRUE(check_norm(10, 2));  // exactly 5x
  auto over = check_norm(10.5, 2);
  ASSERT_FALSE(over);
  EXPECT_TRUE(over.error().is(errc::refused));
  EXPECT_EQ(over.error().message, "update norm 10.5 is over 5x the round's median of 2");
  EXPECT_TRUE(check_norm(10.5, 2, 6));
  EXPECT_TRUE(check_norm(0, 0));
  EXPECT_FALSE(check_norm(1e-6, 0));  // the others did not move: neither may this one
  EXPECT_FALSE(check_norm(std::numeric_limits<double>::quiet_NaN(), 1));
  // A x100 update among honest ones of about the same size.
  std::vector<double> round = {1.0, 1.2, 0.9, 100.0};
  const double median = median_norm(round);
  EXPECT_TRUE(check_norm(1.2, median));
  EXPECT_FALSE(check_norm(100.0, median));
}

TEST(UpdateCheck, RerunDistanceIsRelativeToTheLargerDelta) {
  const auto reference = two({0, 0}, {0});
  const auto update = two({3, 4}, {0});
  EXPECT_DOUBLE_EQ(rerun_distance(reference, update, update).value(), 0.0);
  EXPECT_DOUBLE_EQ(rerun_distance(reference, reference, reference).value(), 0.0);
  // Deltas (3, 4, 0) and (3, 4.5, 0): distance 0.5 over the larger norm, sqrt(29.25).
  EXPECT_DOUBLE_EQ(rerun_distance(reference, update, two({3, 4.5}, {0})).value(), 0.5 / std::sqrt(29.25));
  // Sign flipped: 2; the reference sent back unchanged: 1.
  EXPECT_DOUBLE_EQ(rerun_distance(reference, update, two({-3, -4}, {0})).value(), 2.0);
  EXPECT_DOUBLE_EQ(rerun_distance(reference, update, reference).value(), 1.0);
}

TEST(UpdateCheck, RerunWithinTheToleranceAgrees) {
  const auto reference = two({1, 1}, {1});
  const auto update = two({1.5f, 0.5f}, {1.25f});
  // Float noise of the kind two devices produce: a relative 1e-3 on each coordinate.
  const auto noisy = two({1.5f + 5e-4f, 0.5f - 5e-4f}, {1.25f + 2.5e-4f});
  EXPECT_TRUE(check_rerun(reference, update, noisy));
  auto flipped = check_rerun(reference, update, two({0.5f, 1.5f}, {0.75f}));
  ASSERT_FALSE(flipped);
  EXPECT_TRUE(flipped.error().is(errc::refused));
  EXPECT_EQ(flipped.error().message,
            "update differs from an independent re-run of the same round by 2 of its size (tolerance 0.05)");
  // A partly trained update (half the steps' progress) is outside the default too.
  EXPECT_FALSE(check_rerun(reference, update, two({1.25f, 0.75f}, {1.125f})));
  EXPECT_TRUE(check_rerun(reference, update, two({1.25f, 0.75f}, {1.125f}), 0.5));
  // A malformed re-run says so.
  auto bad = check_rerun(reference, update, two({1, std::numeric_limits<float>::quiet_NaN()}, {1}));
  EXPECT_EQ(bad.error().message, "re-run: tensor 'a': value 1 is NaN (did training diverge?)");
}

}  // namespace
}  // namespace runsnack::pool::training
