#include "pool/scheduling/rng.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace runsnack::pool::scheduling {
namespace {

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  // Box-Muller; the second value is dropped so that the state alone decides the next draw.
  double u1 = 1.0 - uniform();  // (0, 1]
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double Rng::gamma(double shape) {
  // Marsaglia and Tsang; shape < 1 by the boost Gamma(shape+1) * U^(1/shape).
  if (shape < 1.0) return gamma(shape + 1.0) * std::pow(1.0 - uniform(), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = normal(), v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double Rng::beta(double a, double b) {
  double x = gamma(a), y = gamma(b);
  return x / (x + y);
}

nlohmann::json Rng::save() const {
  nlohmann::json out = nlohmann::json::array();
  char buf[17];
  for (auto w : s_) {
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(w));
    out.push_back(buf);
  }
  return out;
}

Result<Rng> Rng::load(const nlohmann::json& j) {
  if (!j.is_array() || j.size() != 4) return fail(errc::malformed, "rng state: expected four hex words");
  Rng r;
  bool all_zero = true;
  for (std::size_t i = 0; i < 4; ++i) {
    if (!j[i].is_string() || j[i].get_ref<const std::string&>().size() != 16)
      return fail(errc::malformed, "rng state: expected four 16-digit hex words");
    const auto& s = j[i].get_ref<const std::string&>();
    std::uint64_t w = 0;
    for (char ch : s) {
      int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
      if (v < 0) return fail(errc::malformed, "rng state: bad hex digit");
      w = (w << 4) | static_cast<std::uint64_t>(v);
    }
    r.s_[i] = w;
    all_zero = all_zero && w == 0;
  }
  if (all_zero) return fail(errc::malformed, "rng state: all zero");
  return r;
}

}  // namespace runsnack::pool::scheduling
