#pragma once
// Comparing replicas of one task's result and finding the majority. A
// workload declares how its results compare: bit for bit (deterministic
// output) or element-wise within a tolerance (floating point that may differ
// across GPUs and drivers).

#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace runsnack::pool::scheduling {

struct Tolerance {
  double abs = 0;  // |a - b| <= abs + rel * max(|a|, |b|)
  double rel = 0;
};

bool agree_exact(std::string_view a, std::string_view b);
// Same length and every pair within the tolerance; NaN agrees only with NaN.
bool agree_within(std::span<const double> a, std::span<const double> b, Tolerance t);

struct QuorumResult {
  bool decided = false;               // some result has `needed` agreeing copies (itself included)
  std::size_t winner = 0;             // when decided: the result to keep
  std::vector<std::size_t> agreeing;  // when decided: the copies that agree with it
  std::vector<std::size_t> disagreeing;
};

// Among `n` replicas, the one that the most others agree with (the lowest
// index on a tie); decided when that group has at least `needed` members.
// `agree(i, j)` need not be transitive (tolerances are not): groups are
// formed around each candidate. O(n^2) calls; n is a handful.
QuorumResult quorum(std::size_t n, std::size_t needed, const std::function<bool(std::size_t, std::size_t)>& agree);

}  // namespace runsnack::pool::scheduling
