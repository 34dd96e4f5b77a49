// The outer optimizer against hand-computed steps (values exact in binary, so compared exactly).
#include "pool/training/outer_optimizer.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool::training {
namespace {

Weights vec(std::vector<float> v) {
  Weights w;
  w.tensors["w"] = {{static_cast<std::int64_t>(v.size())}, std::move(v)};
  return w;
}

const std::vector<float>& values(const Weights& w) { return w.tensors.at("w").values; }

TEST(OuterOptimizer, NesterovStepsMatchHandComputedValues) {
  OuterOptimizer opt({.learning_rate = 0.5, .momentum = 0.5, .nesterov = true});
  // Round 1: g = (1, 2) - (0.5, 2.5) = (0.5, -0.5); v = g; d = g + 0.5 v = (0.75, -0.75);
  // next = reference - 0.5 d = (0.625, 2.375).
  auto next = opt.step(vec({1, 2}), vec({0.5f, 2.5f}));
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(values(*next), (std::vector<float>{0.625f, 2.375f}));
  EXPECT_EQ(values(opt.momentum()), (std::vector<float>{0.5f, -0.5f}));
  // Round 2: g = (0.25, 0); v = 0.5 (0.5, -0.5) + g = (0.5, -0.25); d = g + 0.5 v = (0.5, -0.125);
  // next = (0.625, 2.375) - 0.5 d = (0.375, 2.4375).
  next = opt.step(*next, vec({0.375f, 2.375f}));
  ASSERT_TRUE(next);
  EXPECT_EQ(values(*next), (std::vector<float>{0.375f, 2.4375f}));
  EXPECT_EQ(values(opt.momentum()), (std::vector<float>{0.5f, -0.25f}));
}

TEST(OuterOptimizer, HeavyBallStepsMatchHandComputedValues) {
  OuterOptimizer opt({.learning_rate = 0.5, .momentum = 0.5, .nesterov = false});
  // d = v: round 1 moves by 0.5 (0.5, -0.5); round 2 by 0.5 (0.5, -0.25).
  auto next = opt.step(vec({1, 2}), vec({0.5f, 2.5f}));
  EXPECT_EQ(values(next.value()), (std::vector<float>{0.75f, 2.25f}));
  next = opt.step(*next, vec({0.5f, 2.25f}));
  EXPECT_EQ(values(next.value()), (std::vector<float>{0.5f, 2.375f}));
}

TEST(OuterOptimizer, RateOneWithoutMomentumIsTheAverage) {
  OuterOptimizer opt({.learning_rate = 1, .momentum = 0});
  const auto average = vec({0.3f, -7.1f, 2.0f});
  EXPECT_EQ(opt.step(vec({1, 1, 1}), average).value(), average);
}

TEST(OuterOptimizer, RestoredMomentumContinuesExactlyAsIfNeverStopped) {
  const OuterOptimizerOptions options{.learning_rate = 0.7, .momentum = 0.9};
  OuterOptimizer straight(options);
  auto r1 = straight.step(vec({1, 2, 3}), vec({0.9f, 2.1f, 2.7f})).value();
  const auto saved = encode_weights(straight.momentum()).value();
  auto r2 = straight.step(r1, vec({0.8f, 2.3f, 2.6f})).value();

  OuterOptimizer resumed(options, parse_weights(saved).value());
  EXPECT_EQ(resumed.step(r1, vec({0.8f, 2.3f, 2.6f})).value(), r2);
  EXPECT_EQ(resumed.momentum(), straight.momentum());
}

TEST(OuterOptimizer, AFailedStepLeavesTheMomentumAsItWas) {
  OuterOptimizer opt({.learning_rate = 0.5, .momentum = 0.5});
  ASSERT_TRUE(opt.step(vec({1}), vec({0})));
  const Weights before = opt.momentum();
  auto reshaped = opt.step(vec({1}), vec({0, 0}));
  ASSERT_FALSE(reshaped);
  EXPECT_TRUE(reshaped.error().is(errc::malformed));
  EXPECT_EQ(reshaped.error().message, "average: tensor 'w': shape [2] but the round's weights have [1]");
  auto wrong_momentum = opt.step(vec({1, 1}), vec({0, 0}));
  ASSERT_FALSE(wrong_momentum);
  EXPECT_NE(wrong_momentum.error().message.find("saved momentum does not fit these weights"),
            std::string::npos);
  EXPECT_EQ(opt.momentum(), before);
  // Leaving float32's range says what to change.
  OuterOptimizer huge({.learning_rate = 1e30, .momentum = 0});
  auto overflow = huge.step(vec({0}), vec({1e10f}));
  ASSERT_FALSE(overflow);
  EXPECT_NE(overflow.error().message.find("lower --outer-lr"), std::string::npos);
  EXPECT_TRUE(huge.momentum().tensors.empty());
}

TEST(OuterOptimizer, OptionsOutOfRangeAreRefused) {
  EXPECT_FALSE(OuterOptimizer({.learning_rate = 0}).step(vec({1}), vec({0})));
  EXPECT_FALSE(OuterOptimizer({.momentum = 1}).step(vec({1}), vec({0})));
  EXPECT_FALSE(OuterOptimizer({.momentum = -0.1}).step(vec({1}), vec({0})));
}

}  // namespace
}  // namespace runsnack::pool::training
