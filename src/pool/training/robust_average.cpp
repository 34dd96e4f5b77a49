// Clipped, optionally trimmed, sample-weighted averaging of updates (robust_average.hpp).
#include "pool/training/robust_average.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "pool/training/update_check.hpp"

namespace runsnack::pool::training {

Result<Weights> robust_average(const Weights& reference, std::span<const Contribution> updates,
                               double median_norm, AveragingOptions options) {
  if (updates.empty()) return fail(errc::invalid_argument, "no updates to average");
  if (!(options.clip_over_median > 0) || !(options.trim_fraction >= 0 && options.trim_fraction < 0.5) ||
      !(median_norm >= 0) || !std::isfinite(median_norm))
    return fail(errc::invalid_argument,
                "averaging needs clip > 0, 0 <= trim < 0.5 and a finite median norm >= 0");

  // Per update: its weight and the factor that clips its delta.
  std::vector<double> weight, scale;
  const double clip = options.clip_over_median * median_norm;
  for (std::size_t i = 0; i < updates.size(); ++i) {
    if (updates[i].update == nullptr || updates[i].samples == 0)
      return fail(errc::invalid_argument, "update " + std::to_string(i) + " has no samples to weigh it by");
    auto norm = update_norm(reference, *updates[i].update);
    if (!norm) return Error(norm.error().code, "update " + std::to_string(i) + ": " + norm.error().message);
    weight.push_back(static_cast<double>(updates[i].samples));
    scale.push_back(*norm > clip ? clip / *norm : 1.0);
  }
  const std::size_t n = updates.size();
  const auto trimmed = static_cast<std::size_t>(options.trim_fraction * static_cast<double>(n));  // < n / 2

  Weights out;
  out.metadata = reference.metadata;
  std::vector<std::pair<double, double>> column(n);  // (clipped delta, weight) of one coordinate
  for (const auto& [name, ref] : reference.tensors) {
    Tensor avg{ref.shape, std::vector<float>(ref.values.size())};
    for (std::size_t k = 0; k < ref.values.size(); ++k) {
      for (std::size_t i = 0; i < n; ++i)
        column[i] = {
            scale[i] * (static_cast<double>(updates[i].update->tensors.at(name).values[k]) - ref.values[k]),
            weight[i]};
      if (trimmed > 0)
        std::stable_sort(column.begin(), column.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      double sum = 0, total = 0;
      for (std::size_t i = trimmed; i < n - trimmed; ++i) {
        sum += column[i].first * column[i].second;
        total += column[i].second;
      }
      avg.values[k] = static_cast<float>(ref.values[k] + sum / total);
    }
    out.tensors.emplace(name, std::move(avg));
  }
  return out;
}

}  // namespace runsnack::pool::training
