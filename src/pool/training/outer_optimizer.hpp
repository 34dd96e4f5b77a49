#pragma once
// The outer optimizer of DiLoCo-style local SGD: after each round the
// averaged update is treated as a gradient step and applied with momentum,
// which lets rounds of many local steps converge about as fast as one device.
//   g = reference - average                  (the outer gradient)
//   v = momentum x v + g                     (v starts at zero)
//   d = g + momentum x v   (Nesterov)   or   d = v   (heavy ball)
//   next = reference - learning_rate x d
// This is torch.optim.SGD(lr, momentum, nesterov, dampening=0) applied to g.
// learning_rate 1 with momentum 0 makes `next` the average (plain federated
// averaging).
//
// Not thread-safe: one optimizer per job, stepped once per round.

#include "core/error.hpp"
#include "pool/training/weights.hpp"

namespace runsnack::pool::training {

struct OuterOptimizerOptions {
  // DiLoCo's values (Douillard et al., 2023): --outer-lr and --outer-momentum.
  double learning_rate = 0.7;  // > 0
  double momentum = 0.9;       // in [0, 1)
  bool nesterov = true;
};

class OuterOptimizer {
 public:
  // `momentum` is the state saved after an earlier round (momentum()), or
  // empty to start from zero.
  explicit OuterOptimizer(OuterOptimizerOptions options, Weights momentum = {});

  // The next round's weights (with the reference's metadata), and the
  // momentum updated. Fails, leaving the momentum as it was, with
  // errc::invalid_argument for options out of range or a step that leaves
  // float32's range (lower the learning rate), errc::malformed when `average`
  // or the momentum has another layout than `reference`.
  Result<Weights> step(const Weights& reference, const Weights& average);

  // The momentum after the last step, to save with the round (encode_weights).
  const Weights& momentum() const { return momentum_; }
  const OuterOptimizerOptions& options() const { return options_; }

 private:
  OuterOptimizerOptions options_;
  Weights momentum_;
};

}  // namespace runsnack::pool::training
