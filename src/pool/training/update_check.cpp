// Checks of one update against the round's reference (update_check.hpp).
#include "pool/training/update_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/printable.hpp"

namespace runsnack::pool::training {

namespace {
std::string named(const std::string& name) { return "'" + printable(name) + "'"; }

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

Result<void> check_finite(const Weights& w) {
  for (const auto& [name, t] : w.tensors) {
    const auto bad =
        std::find_if(t.values.begin(), t.values.end(), [](float v) { return !std::isfinite(v); });
    if (bad != t.values.end())
      return fail(errc::malformed, "tensor " + named(name) + ": value " +
                                       std::to_string(bad - t.values.begin()) + " is " +
                                       (std::isnan(*bad) ? "NaN" : "infinite") + " (did training diverge?)");
  }
  return {};
}

// ||a - b||, a and b of the same layout.
double distance(const Weights& a, const Weights& b) {
  double sum = 0;
  for (const auto& [name, ta] : a.tensors) {
    const Tensor& tb = b.tensors.at(name);
    for (std::size_t i = 0; i < ta.values.size(); ++i) {
      const double d = static_cast<double>(ta.values[i]) - tb.values[i];
      sum += d * d;
    }
  }
  return std::sqrt(sum);
}

// ||(a - ref) - (b - ref)|| computed from the deltas, as the re-run check defines it.
double delta_distance(const Weights& reference, const Weights& a, const Weights& b) {
  double sum = 0;
  for (const auto& [name, tr] : reference.tensors) {
    const Tensor& ta = a.tensors.at(name);
    const Tensor& tb = b.tensors.at(name);
    for (std::size_t i = 0; i < tr.values.size(); ++i) {
      const double d = (static_cast<double>(ta.values[i]) - tr.values[i]) -
                       (static_cast<double>(tb.values[i]) - tr.values[i]);
      sum += d * d;
    }
  }
  return std::sqrt(sum);
}
}  // namespace

Result<void> check_same_layout(const Weights& reference, const Weights& update) {
  for (const auto& [name, t] : reference.tensors) {
    const auto it = update.tensors.find(name);
    if (it == update.tensors.end())
      return fail(errc::malformed, "update has no tensor " + named(name) + " (the round's weights have " +
                                       std::to_string(reference.tensors.size()) + " tensors)");
    if (it->second.shape != t.shape)
      return fail(errc::malformed, "tensor " + named(name) + ": shape " + shape_text(it->second.shape) +
                                       " but the round's weights have " + shape_text(t.shape));
    // A broken invariant of Weights, not of the file: parse_weights never builds one.
    if (it->second.values.size() != t.values.size())
      return fail(errc::malformed, "tensor " + named(name) + ": " + std::to_string(it->second.values.size()) +
                                       " values for shape " + shape_text(t.shape));
  }
  for (const auto& [name, t] : update.tensors)
    if (!reference.tensors.contains(name))
      return fail(errc::malformed,
                  "update has tensor " + named(name) + " that the round's weights do not have");
  return {};
}

Result<double> update_norm(const Weights& reference, const Weights& update) {
  if (auto same = check_same_layout(reference, update); !same) return same.error();
  if (auto finite = check_finite(update); !finite) return finite.error();
  return distance(update, reference);
}

double median_norm(std::vector<double> norms) {
  if (norms.empty()) return 0;
  const std::size_t mid = norms.size() / 2;
  std::nth_element(norms.begin(), norms.begin() + static_cast<std::ptrdiff_t>(mid), norms.end());
  const double upper = norms[mid];
  if (norms.size() % 2 == 1) return upper;
  const double lower = *std::max_element(norms.begin(), norms.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

Result<void> check_norm(double norm, double median, double max_over_median) {
  if (!(norm <= max_over_median * median))  // also refuses a NaN norm
    return fail(errc::refused, "update norm " + number(norm) + " is over " + number(max_over_median) +
                                   "x the round's median of " + number(median));
  return {};
}

Result<double> rerun_distance(const Weights& reference, const Weights& update, const Weights& rerun) {
  auto update_size = update_norm(reference, update);
  if (!update_size) return update_size.error();
  auto rerun_size = update_norm(reference, rerun);
  if (!rerun_size) return Error(rerun_size.error().code, "re-run: " + rerun_size.error().message);
  const double scale = std::max(*update_size, *rerun_size);
  if (scale == 0) return 0.0;
  return delta_distance(reference, update, rerun) / scale;
}

Result<void> check_rerun(const Weights& reference, const Weights& update, const Weights& rerun,
                         double tolerance) {
  auto d = rerun_distance(reference, update, rerun);
  if (!d) return d.error();
  if (!(*d <= tolerance))
    return fail(errc::refused, "update differs from an independent re-run of the same round by " +
                                   number(*d) + " of its size (tolerance " + number(tolerance) + ")");
  return {};
}

}  // namespace runsnack::pool::training
