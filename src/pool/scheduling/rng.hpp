#pragma once
// A small seeded generator (xoshiro256**) for the scheduler's and the trust
// policy's random draws. Its whole state is four words, so it is saved with
// the learned state and a restarted coordinator continues the identical
// sequence; std::mt19937's text state and the std:: distributions' caches
// would make that fragile. The samplers keep no cache for the same reason.
//
// Not thread-safe; each owner keeps its own.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>

namespace runsnack::pool::scheduling {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 1);

  std::uint64_t next();
  double uniform();                  // [0, 1)
  double normal();                   // N(0, 1)
  double gamma(double shape);        // Gamma(shape, 1), shape > 0
  double beta(double a, double b);   // a, b > 0

  nlohmann::json save() const;       // the state as four hex words
  static Result<Rng> load(const nlohmann::json& j);

 private:
  std::array<std::uint64_t, 4> s_{};
};

}  // namespace runsnack::pool::scheduling
