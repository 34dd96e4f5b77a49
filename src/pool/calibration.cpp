#include "pool/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace runsnack::pool {

namespace {

inline std::uint64_t step(std::uint64_t x) {
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 32);
}

std::uint64_t walk(std::uint64_t x, std::int64_t steps) {
  for (std::int64_t i = 0; i < steps; ++i) x = step(x);
  return x;
}

std::uint64_t start_of(const std::string& seed) {
  std::uint64_t x = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : seed) x = (x ^ c) * 0x100000001b3ULL;
  return x;
}

std::string hex64(std::uint64_t x) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(x));
  return out;
}

std::optional<std::uint64_t> parse_hex64(const std::string& s) {
  if (s.size() != 16) return std::nullopt;
  std::uint64_t x = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    x = x << 4 | static_cast<std::uint64_t>(d);
  }
  return x;
}

}  // namespace

CalibrationChallenge make_challenge(double hint, std::uint64_t random) {
  double want = hint > 0 && std::isfinite(hint) ? hint * kCalibrationSeconds : 0;
  auto iterations = static_cast<std::int64_t>(
      std::clamp(want, static_cast<double>(kMinCalibrationIterations), static_cast<double>(kMaxCalibrationIterations)));
  iterations -= iterations % kCalibrationSegments;
  return {hex64(random), iterations};
}

std::vector<std::string> answer_challenge(const CalibrationChallenge& c) {
  std::vector<std::string> out;
  const std::int64_t per = c.iterations / kCalibrationSegments;
  std::uint64_t x = start_of(c.seed);
  for (int i = 0; i < kCalibrationSegments; ++i) {
    x = walk(x, per);
    out.push_back(hex64(x));
  }
  return out;
}

bool check_answer(const CalibrationChallenge& c, const std::vector<std::string>& answer, int a, int b) {
  if (answer.size() != static_cast<std::size_t>(kCalibrationSegments)) return false;
  const std::int64_t per = c.iterations / kCalibrationSegments;
  for (int i : {a, b}) {
    if (i < 0 || i >= kCalibrationSegments) return false;
    std::optional<std::uint64_t> from = i == 0 ? std::optional<std::uint64_t>(start_of(c.seed)) : parse_hex64(answer[i - 1]);
    auto to = parse_hex64(answer[static_cast<std::size_t>(i)]);
    if (!from || !to || walk(*from, per) != *to) return false;
  }
  return true;
}

double measured_score(const CalibrationChallenge& c, double seconds, double hint) {
  double measured = static_cast<double>(c.iterations) / std::max(seconds, 1e-3);
  return hint > 0 && std::isfinite(hint) ? std::min(hint, measured) : measured;
}

double calibrate_cpu() {
  auto start = std::chrono::steady_clock::now();
  std::uint64_t x = 88172645463325252ull, ops = 0;
  volatile std::uint64_t sink = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200)) {
    x = walk(x, 100000);
    ops += 100000;
    sink = sink + x;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(ops) / s;
}

}  // namespace runsnack::pool
