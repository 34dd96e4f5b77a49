#pragma once
// PathModel: what one direction of an emulated WAN path does to each packet,
// with no I/O (wanbridge.cpp feeds it packets and the time; path_model_test.cpp
// steps it with made-up times).
//
// A packet arriving at `now` goes through, in order:
//   1. a blackhole (outage): lost while now < outage_until;
//   2. loss: independent (loss_burst <= 1) or bursty, a two-state Gilbert-Elliott
//      chain whose bad state loses every packet: mean burst length loss_burst
//      packets, long-run loss rate `loss`;
//   3. the bottleneck: a link of rate_mbit that sends one packet after another
//      (size * 8 / rate each) behind a tail-drop buffer of queue_ms of sending time.
//      The link may count up to burst_ms of its idle time as spent sending: the
//      bridge reads a frame some microseconds after it arrived (later on a busy
//      machine), and without this credit those microseconds would be lost to the
//      link for good and it would carry visibly less than its rate;
//   4. propagation: delay_ms one way, plus jitter uniform in [-jitter_ms, +jitter_ms]
//      that never lets a packet overtake the one before it (links do not
//      reorder by themselves), unless
//   5. reordering: with probability `reorder` a packet is held back reorder_ms
//      more, so the packets behind it arrive first.
// The caller releases each delivered packet at its release time and drops it
// instead when the path is blacked out at that moment (in_outage()).
//
// Not thread-safe: one PathModel per direction, used by one thread.

#include <cstddef>
#include <cstdint>
#include <random>

namespace netlab {

using Nanos = std::int64_t;  // CLOCK_MONOTONIC nanoseconds

struct PathParams {
  double delay_ms = 0;      // one-way propagation delay
  double jitter_ms = 0;     // uniform +-, order kept
  double loss = 0;          // long-run loss probability, 0..1
  double loss_burst = 1;    // mean loss burst in packets; <= 1: independent losses
  double reorder = 0;       // probability that a packet is held back
  double reorder_ms = 0;    // how much longer a held-back packet takes (0: half the delay, at least 1 ms)
  double rate_mbit = 0;     // bottleneck rate in Mbit/s (Ethernet frame bytes); 0: unlimited
  double queue_ms = 0;      // bottleneck buffer in ms of sending time; 0: 2 * delay_ms + 5 ms
  double burst_ms = 1;      // idle link time that may be spent later (token bucket depth)
};

enum class Fate { deliver, lost, queue_full, outage };

struct Decision {
  Fate fate = Fate::deliver;
  Nanos release_at = 0;  // when fate == deliver
  bool reordered = false;
};

class PathModel {
 public:
  PathModel(const PathParams& params, std::uint64_t seed);

  // New parameters take effect for packets arriving from now on.
  void set_params(const PathParams& params);
  const PathParams& params() const { return params_; }

  // A blackhole from now until `until` (both directions call this).
  void blackhole_until(Nanos until) { outage_until_ = until; }
  bool in_outage(Nanos now) const { return now < outage_until_; }

  // What happens to a packet of `bytes` (Ethernet frame) arriving at `now`.
  Decision admit(Nanos now, std::size_t bytes);

 private:
  bool lose_next();
  Nanos jitter();

  PathParams params_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  bool bad_state_ = false;    // Gilbert-Elliott: in a loss burst
  Nanos link_free_at_ = 0;    // when the bottleneck finishes sending what it holds
  Nanos last_release_ = 0;    // release time of the last in-order packet
  Nanos outage_until_ = 0;
};

}  // namespace netlab
