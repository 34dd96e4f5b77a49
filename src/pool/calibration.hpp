#pragma once
// A device's speed as the coordinator measures it (docs/SCHEDULER.md "What a
// device is paid"): a worker's own score is only a hint. At registration the
// coordinator sends a challenge sized by the hint (about half a second of
// work at the hinted speed, bounded), the worker walks a sequential,
// non-linear 64-bit chain from the challenge's seed and returns a checkpoint
// every iterations/segments steps, and the coordinator times the round trip
// and re-walks two segments it picks at random (1/32 of the work). The
// device's score is min(hint, iterations / seconds). Faking half of the
// checkpoints to look twice as fast passes with probability 1/4 and is
// refused otherwise; no shortcut through the chain is known (it mixes
// multiplication with xor-shifts, so it is not linear over GF(2)).
//
// Pure functions; thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::pool {

inline constexpr int kCalibrationSegments = 64;
inline constexpr double kCalibrationSeconds = 0.5;         // at the hinted speed
inline constexpr std::int64_t kMinCalibrationIterations = 1'000'000;
// The most a hint can ask for: well under a second for a real CPU (about 10^9
// steps/s), a few seconds unoptimised; a faster device still measures as
// fast (the score is steps over seconds), a liar pays with its time.
inline constexpr std::int64_t kMaxCalibrationIterations = 200'000'000;

struct CalibrationChallenge {
  std::string seed;  // random, hex
  std::int64_t iterations = 0;  // a multiple of kCalibrationSegments
};

// The challenge for a device hinting `hint` chain steps per second (0: unknown).
CalibrationChallenge make_challenge(double hint, std::uint64_t random);
// The worker's answer: kCalibrationSegments checkpoints (hex), the last one the chain's end.
std::vector<std::string> answer_challenge(const CalibrationChallenge& challenge);
// Re-walks segments `a` and `b` (< kCalibrationSegments) of `answer`.
bool check_answer(const CalibrationChallenge& challenge, const std::vector<std::string>& answer, int a, int b);
// The score a timed, checked answer shows: steps per second, never above the hint (when one was given).
double measured_score(const CalibrationChallenge& challenge, double seconds, double hint);

// Steps of the chain per second on this CPU, over about 0.2 s: the hint a worker sends.
double calibrate_cpu();

}  // namespace runsnack::pool
