// Momentum SGD on the outer gradient (outer_optimizer.hpp).
#include "pool/training/outer_optimizer.hpp"

#include <cmath>
#include <utility>

#include "core/printable.hpp"
#include "pool/training/update_check.hpp"

namespace runsnack::pool::training {

OuterOptimizer::OuterOptimizer(OuterOptimizerOptions options, Weights momentum)
    : options_(options), momentum_(std::move(momentum)) {}

Result<Weights> OuterOptimizer::step(const Weights& reference, const Weights& average) {
  const double lr = options_.learning_rate, mu = options_.momentum;
  if (!(lr > 0) || !std::isfinite(lr) || !(mu >= 0 && mu < 1))
    return fail(errc::invalid_argument,
                "the outer optimizer needs a learning rate > 0 and a momentum in [0, 1)");
  if (auto same = check_same_layout(reference, average); !same)
    return Error(same.error().code, "average: " + same.error().message);
  const bool fresh = momentum_.tensors.empty();
  if (!fresh)
    if (auto same = check_same_layout(reference, momentum_); !same)
      return Error(same.error().code, "saved momentum does not fit these weights: " + same.error().message);

  Weights next, velocity;
  next.metadata = reference.metadata;
  for (const auto& [name, ref] : reference.tensors) {
    const Tensor& avg = average.tensors.at(name);
    Tensor out{ref.shape, std::vector<float>(ref.values.size())};
    Tensor v{ref.shape, std::vector<float>(ref.values.size())};
    for (std::size_t k = 0; k < ref.values.size(); ++k) {
      const double g = static_cast<double>(ref.values[k]) - avg.values[k];
      const double previous = fresh ? 0.0 : momentum_.tensors.at(name).values[k];
      const double vk = mu * previous + g;
      const double d = options_.nesterov ? g + mu * vk : vk;
      v.values[k] = static_cast<float>(vk);
      out.values[k] = static_cast<float>(ref.values[k] - lr * d);
      if (!std::isfinite(out.values[k]) || !std::isfinite(v.values[k]))
        return fail(errc::invalid_argument, "outer step left float32's range at tensor '" + printable(name) +
                                                "'; lower --outer-lr or --outer-momentum");
    }
    next.tensors.emplace(name, std::move(out));
    velocity.tensors.emplace(name, std::move(v));
  }
  momentum_ = std::move(velocity);
  return next;
}

}  // namespace runsnack::pool::training
