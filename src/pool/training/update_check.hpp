#pragma once
// Checks of one worker's update against the round's reference weights (the
// weights every worker started the round from), before it is averaged:
//   - cheap, on every update: the same tensor names and shapes as the
//     reference, every value finite, and the norm of its delta
//     (update - reference) not far above the round's median delta norm;
//   - on a sample of updates: agreement with an independent re-run of the same
//     round (same weights, data shard, seed and steps) on another device.
// The norm check catches scaled updates (x100); a sign-flipped or random
// update of an honest size passes it and is left to the re-run and to the
// clipping in robust_average.hpp.
//
// Pure functions of their arguments; safe from any thread.

#include <vector>

#include "core/error.hpp"
#include "pool/training/weights.hpp"

namespace runsnack::pool::training {

// An update whose delta norm is above this multiple of the round's median is
// refused. Honest updates of one round differ by their shards, typically within
// 2-3x of each other; 5x leaves room for a hard shard and still refuses a
// scaled update long before it could dominate (those between the clip, 2x,
// and 5x are accepted but clipped when averaged).
inline constexpr double kDefaultMaxNormOverMedian = 5.0;

// Two runs of the same round agree when the relative L2 distance of their
// deltas is at most this. Float addition is not associative: a different
// BLAS, thread count, CPU vs GPU or cuDNN algorithm sums in another order, and
// the rounding differences (~1e-7 per operation) grow over the local steps, so
// two honest runs of a seeded script typically differ by 1e-4..1e-2 of the
// delta's size. A sign-flipped update is at distance 2, a random one or a
// returned reference at ~1, one trained on other data at ~1, so 0.05 keeps
// honest hardware variation well inside and cheating well outside.
inline constexpr double kDefaultRerunTolerance = 0.05;

// Ok when `update` has exactly the reference's tensor names and shapes;
// otherwise errc::malformed naming the first tensor that differs.
Result<void> check_same_layout(const Weights& reference, const Weights& update);

// The L2 norm of update - reference over all tensors, after checking the
// layout and that every value of `update` is finite (errc::malformed naming
// the tensor and the index of the first NaN or infinity).
Result<double> update_norm(const Weights& reference, const Weights& update);

// The median of a round's update norms (the mean of the two middle ones for an
// even count; 0 for none). With fewer than 3 norms a median is no defence (one
// of two can drag it anywhere): the caller should then use an earlier round's.
double median_norm(std::vector<double> norms);

// errc::refused when `norm` is above max_over_median x `median` (so with a
// median of 0, any update that moved at all).
Result<void> check_norm(double norm, double median, double max_over_median = kDefaultMaxNormOverMedian);

// ||delta_a - delta_b|| / max(||delta_a||, ||delta_b||), deltas against
// `reference`; 0 when both deltas are zero. Fails as update_norm does.
Result<double> rerun_distance(const Weights& reference, const Weights& update, const Weights& rerun);

// Ok when the update and the re-run agree within `tolerance`; errc::refused
// with the distance otherwise.
Result<void> check_rerun(const Weights& reference, const Weights& update, const Weights& rerun,
                         double tolerance = kDefaultRerunTolerance);

}  // namespace runsnack::pool::training
