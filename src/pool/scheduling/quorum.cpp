#include "pool/scheduling/quorum.hpp"

#include <algorithm>
#include <cmath>

namespace runsnack::pool::scheduling {

bool agree_exact(std::string_view a, std::string_view b) { return a == b; }

bool agree_within(std::span<const double> a, std::span<const double> b, Tolerance t) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return false;
      continue;
    }
    if (x == y) continue;  // equal infinities too
    double diff = std::abs(x - y);
    if (!(diff <= t.abs + t.rel * std::max(std::abs(x), std::abs(y)))) return false;
  }
  return true;
}

QuorumResult quorum(std::size_t n, std::size_t needed, const std::function<bool(std::size_t, std::size_t)>& agree) {
  QuorumResult out;
  std::vector<std::size_t> best;
  std::size_t best_center = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::size_t> group;
    for (std::size_t j = 0; j < n; ++j)
      if (j == i || agree(i, j)) group.push_back(j);
    if (group.size() > best.size()) {
      best = std::move(group);
      best_center = i;
    }
  }
  if (n == 0 || best.size() < std::max<std::size_t>(needed, 1)) return out;
  out.decided = true;
  out.winner = best_center;
  out.agreeing = best;
  for (std::size_t j = 0; j < n; ++j)
    if (!std::binary_search(best.begin(), best.end(), j)) out.disagreeing.push_back(j);
  return out;
}

}  // namespace runsnack::pool::scheduling
