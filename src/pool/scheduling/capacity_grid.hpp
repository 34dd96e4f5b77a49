#pragma once
// The online devices of one workload grouped into cells of similar relative
// speed (a quarter octave) and price (half an octave). The scheduler's one
// hard question, "how many tasks can the devices that beat device D for this
// job finish within H seconds?", is then one pass over the non-empty cells
// (tens to a few hundred) plus the busy devices that will be free in time,
// never a pass over all devices.
//
// Cell sums are kept in fixed point, so a cell's averages depend only on its
// members, not on the order they came and went in: a grid rebuilt from saved
// state answers exactly as the original did.
//
// Not thread-safe.

#include "pool/scheduling/types.hpp"

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace runsnack::pool::scheduling {

// The number a preference minimises for a device that would take `task_s`
// seconds, costs `price_per_hour` and delivers with probability `reliability`.
// Each is monotone in time, price and risk, so the device a preference picks
// is always on the Pareto front of the three.
//   fast:     expected seconds to a result, task_s / reliability
//   cheap:    expected cost of a result, (price + 0.001) * task_s / reliability
//   balanced: their geometric mean, task_s * sqrt(price + 0.001) / reliability
double preference_score(Preference p, double task_s, double price_per_hour, double reliability);

// One non-dominated point of the (task time, cost per task, failure risk) front.
struct FrontPoint {
  double task_s = 0;
  double cost_per_task = 0;
  double reliability = 0;
  double price_per_hour = 0;
  std::uint32_t devices = 0;
};

class CapacityGrid {
 public:
  struct Member {
    double relative_speed = 1;  // Estimator::relative_speed
    double price_per_hour = 0;
    double success = 1;         // probability a result comes back good
    double departure_rate = 0;  // per second
    double verification = 0;    // probability its result needs a replica before it counts
  };
  static constexpr std::uint32_t kNone = 0xffffffffu;

  // Inserts or moves `device`, keeping its idle/busy state.
  void set(std::uint32_t device, const Member& m);
  void erase(std::uint32_t device);
  bool contains(std::uint32_t device) const;
  void set_busy(std::uint32_t device, double free_at);
  void set_idle(std::uint32_t device);

  struct Query {
    double now = 0;
    double horizon_s = 0;        // completions count only when they end within now + horizon_s
    double unit_s = 1;           // seconds of one task at relative speed 1
    double replica_s = 0;        // seconds a replica takes (on an average device)
    Preference preference = Preference::fast;
    double threshold = 0;        // the asking device's preference score: only better cells count
    std::uint32_t exclude = kNone;  // the asking device itself
    double target = 0;           // counting may stop once this is reached
  };
  // Expected completions (each weighted by its cell's reliability) by the
  // devices that beat `threshold`; counting stops once `target` is reached.
  double capacity(const Query& q) const;
  // capacity(q) >= q.target, with a cheap upper bound tried first.
  bool covers(const Query& q) const;

  std::vector<FrontPoint> pareto_front(double unit_s, double replica_s = 0) const;
  // Sum of the members' relative speeds: the pool's throughput in this workload's units.
  double total_speed() const;
  std::size_t cells() const { return live_.size(); }
  std::size_t size() const { return members_; }

 private:
  struct Cell {
    std::int32_t speed_key = 0, price_key = 0;
    std::uint32_t members = 0, idle = 0;
    std::int64_t sum_log2_speed = 0, sum_price = 0, sum_success = 0, sum_rate = 0, sum_verification = 0;
    // The means, recomputed from the sums whenever they change (queries read them often).
    double speed = 0, price = 0, success = 0, rate = 0, verification = 0;
    std::vector<std::pair<double, std::uint32_t>> busy;  // (free at, device), ascending
  };
  struct Slot {
    std::uint32_t cell = kNone;
    std::int64_t log2_speed = 0, price = 0, success = 0, rate = 0, verification = 0;
    bool busy = false;
    double free_at = 0;
  };
  struct CellView {
    double task_s, price, reliability;
  };
  // A task's time on a device of the cell: its run, plus the replica its
  // result needs with the cell's mean verification probability.
  CellView view(const Cell& c, double unit_s, double replica_s) const;
  std::uint32_t cell_for(std::int32_t speed_key, std::int32_t price_key);
  static void update_means(Cell& c);
  void attach(std::uint32_t device);
  void detach(std::uint32_t device);

  std::vector<Cell> cells_;
  std::unordered_map<std::int64_t, std::uint32_t> by_key_;
  std::vector<std::uint32_t> live_;  // non-empty cells, fastest first, then cheapest
  std::vector<Slot> slots_;          // by device
  std::size_t members_ = 0;
  mutable double total_speed_ = -1;  // cached; < 0 when a member changed
};

}  // namespace runsnack::pool::scheduling
