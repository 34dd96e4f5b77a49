#pragma once
// Averaging a round's accepted updates so that one bad update that passed the
// checks (update_check.hpp) cannot wreck the model:
//   1. each delta (update - reference) whose L2 norm is above
//      clip_over_median x the round's median norm is scaled down to it;
//   2. the clipped deltas are averaged weighted by the samples each worker
//      trained on, optionally per coordinate with the trim_fraction largest
//      and smallest values left out (a trimmed mean, by count of updates);
//   3. the result is reference + that mean.
// Bound: with clipping alone, one update among workers holding shares w_i of
// the samples moves the average by at most w_i x clip x median from where the
// honest ones put it.
//
// Pure; safe from any thread. Sums in double, so the result depends only on
// the order of `updates`, not on the hardware.

#include <cstdint>
#include <span>

#include "core/error.hpp"
#include "pool/training/weights.hpp"

namespace runsnack::pool::training {

// Honest updates mostly sit within 2x of the median norm, so they pass
// untouched; an accepted outlier (up to kDefaultMaxNormOverMedian, 5x) counts
// as at most twice a typical update.
inline constexpr double kDefaultClipOverMedian = 2.0;

struct AveragingOptions {
  double clip_over_median = kDefaultClipOverMedian;  // > 0
  // In [0, 0.5): per coordinate, floor(trim_fraction x n) values are left out
  // at each end. 0 is a plain weighted mean; 0.25 with 4 updates drops the
  // largest and smallest of each coordinate, so a sign flip in one update is
  // dropped wherever it is extreme.
  double trim_fraction = 0;
};

struct Contribution {
  const Weights* update = nullptr;  // not owned; must outlive the call
  std::uint64_t samples = 0;        // > 0: how many samples the worker trained on this round
};

// The robust average of `updates` against `reference`, with the reference's
// metadata. Fails with errc::invalid_argument for no updates, an update with
// no samples or options out of range, and errc::malformed for an update whose
// layout differs from the reference (check the updates first).
Result<Weights> robust_average(const Weights& reference, std::span<const Contribution> updates,
                               double median_norm, AveragingOptions options = {});

}  // namespace runsnack::pool::training
