#pragma once
// poolsim's simulation state and the Sim class, shared by its parts:
// sim.cpp (event loop, claims), sim_churn.cpp (devices coming and going),
// sim_verify.cpp (replicas, quorum, trust), sim_metrics.cpp (figures, trace).

#include "model.hpp"
#include "policy.hpp"
#include "sim.hpp"

#include "pool/scheduling/trust_policy.hpp"

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

namespace poolsim::detail {

using sch::Decision;
using sch::Outcome;
using sch::PendingJob;
using sch::Verdict;

enum class Purpose : std::uint8_t { primary, replica, tiebreak, audit, known_answer };
enum class Fate : std::uint8_t { running, result, failed, lost, cancelled };

// Results of one task before it is settled without a vouched-for quorum (two
// copies and the coordinator's kMaxExtraCopies, pool/replication.hpp).
inline constexpr std::size_t kMaxResultsPerTask = 5;
inline constexpr double kTimeLimit = 30 * 86400.0;  // a batch not done in 30 simulated days is reported unfinished

struct Device {
  DeviceSpec spec;
  int slot = 0, identity = 0;
  bool present = false;   // online and working
  bool known = false;     // the coordinator believes it online (until it notices a departure)
  bool excluded = false;
  int attempt = -1;       // the run it is doing (or lost, until noticed)
  std::uint32_t poll_token = 0, epoch = 0;
  int session = 0;
  double since = 0;
  std::vector<std::pair<double, double>> online;  // (from, to)
  std::vector<int> unchecked;                     // tasks accepted from it without a check
  int known_answers = 0;
  int valid_checks = 0;       // results checked right (a quorum, a known answer, a computation)
  int peer = 0, network = 0;  // interned spec.peer / spec.network
};

struct Request {
  int task = -1;          // none for known-answer tasks
  int job = 0;
  Purpose purpose = Purpose::primary;
  std::string id;         // what the policy sees
  std::uint64_t key = 0;  // random stream of its runs
  std::vector<int> producers;
  bool needs_vouched = false;  // a copy for a vouched-for device (WorldConfig::vouched_quorums)
  std::vector<int> attempts;  // running copies
  int runs = 0;
  bool done = false;
  double work = 0;
};

struct Result {
  int device = 0, attempt = 0;
  std::uint64_t value = 0;  // 0 is the right answer
  enum class Judged : std::uint8_t { no, unchecked, valid, invalid } judged = Judged::no;
};

struct Task {
  int job = 0, index = 0;
  double work = 0;
  std::vector<Result> results;
  bool accepted = false, final = false;
  std::uint64_t value = 0;
  int open = 0;  // verification runs outstanding
  int seq = 0;   // verification requests made
};

struct Job {
  JobSpec spec;
  std::string verify_id;
  std::deque<int> queue;    // pending primary requests
  std::vector<int> verify;  // pending verification requests
  int open = 0;
  bool submitted = false, done = false;
  double done_at = 0;
};

struct Attempt {
  int request = 0, device = 0;
  double start = 0, end = 0, stop = 0, price = 0;
  double check_s = 0;  // the coordinator's check of its result, in device-seconds of its cost
  bool fails = false, valid = false, backup = false;
  std::uint64_t value = 0;
  Purpose purpose = Purpose::primary;
  Fate fate = Fate::running;
  bool first_result = false;
};

enum class Ev : std::uint8_t { poll, end, leave, join, detect, submit, trace };
struct Event {
  double t;
  std::uint64_t seq;
  Ev type;
  int a;
  std::uint32_t b;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

inline double exp_draw(std::uint64_t key, double mean) { return -mean * std::log(1.0 - unit(key)); }
inline double normal_draw(std::uint64_t key) {
  double u1 = 1.0 - unit(key), u2 = unit(key ^ 0x9e37ULL);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

class Sim {
 public:
  Sim(const WorldConfig& c, Policy& p) : c_(c), policy_(p), trust_(c.trust, mix(c.seed, 0x7a57)) {}
  Metrics run();

 private:
  void push(double t, Ev type, int a, std::uint32_t b = 0) { events_.push({t, seq_++, type, a, b}); }
  void poll_soon(int d, double delay);
  void join(int slot, int identity);
  void leave(int slot, int identity);
  void notice_departure(int d);
  void exclude(int d);
  void poll(int d);
  void start(int d, int request, bool backup);
  void end(int attempt);
  void stop_copy(int attempt, Fate fate, Outcome told);
  void requeue(int request);
  void adopt(int attempt, int replica);
  void deliver(int request, int attempt);
  void resolve(int task);
  void judge(int device, Result* result, Verdict v);
  // May vouch for a quorum (WorldConfig::vouched_quorums).
  bool vouched(int device) const;
  void accept(int task, std::uint64_t value);
  int new_request(int task, Purpose p, std::vector<int> producers, bool rerun = false);
  // A result the coordinator checks by computation (render, matmul): true when handled.
  bool check_by_computation(int request, int attempt);
  bool eligible(int d, const Request& r) const;
  Metrics collect();
  void trace();

  WorldConfig c_;
  Policy& policy_;
  sch::TrustPolicy trust_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  double now_ = 0;
  std::vector<Device> devices_;
  std::vector<int> slot_device_;  // current identity's device per slot
  std::unordered_map<std::string, int> peers_, networks_;
  std::vector<Request> requests_;
  std::unordered_map<std::string, int> request_by_id_;
  std::unordered_map<int, int> open_replica_of_;  // primary request -> the replica its result just asked for
  std::vector<Task> tasks_;
  std::vector<Job> jobs_;
  std::unordered_map<std::string, int> job_by_entry_;  // "id" and "id#verify" -> job
  std::vector<Attempt> attempts_;
  std::vector<PendingJob> pending_;  // scratch
  std::vector<float> decide_us_;
  std::int64_t cheaters_excluded_ = 0, honest_excluded_ = 0;
};

}  // namespace poolsim::detail
