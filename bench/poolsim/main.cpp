// poolsim: the pool's scheduler against round-robin, random, a plain queue
// and fastest-benchmark-first with backups, on one simulated heterogeneous,
// churning pool with cheaters (docs/POOLSIM.md). Every policy meets the
// same devices, sessions, task sizes, failures and verification.

#include "baselines.hpp"
#include "sim.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace poolsim;
using nlohmann::json;

namespace {

json to_json(const Metrics& m) {
  return {{"policy", m.policy},
          {"finished", m.finished},
          {"makespan_s", m.makespan_s},
          {"utilisation", m.utilisation()},
          {"busy_share", m.busy_share()},
          {"available_device_s", m.available_s},
          {"compute_s", m.total_s},
          {"useful_s", m.useful_s},
          {"verification_s", m.verification_s},
          {"verification_share", m.verification_share()},
          {"lost_s", m.lost_s},
          {"duplicate_s", m.duplicate_s},
          {"wasted_share", m.wasted_share()},
          {"cost", m.cost},
          {"paid", m.paid},
          {"tasks", m.tasks},
          {"backups", m.backups},
          {"lost_runs", m.lost_runs},
          {"failed_runs", m.failed_runs},
          {"replicas", m.replicas},
          {"known_answer_tasks", m.known_answer_tasks},
          {"tie_breaks", m.tie_breaks},
          {"audits", m.audits},
          {"verification_split_s",
           {{"replicas", m.replica_s}, {"known_answer", m.known_answer_s}, {"tie_breaks", m.tie_break_s}, {"audits", m.audit_s},
            {"checks", m.check_s}}},
          {"wrong_returned", m.wrong_returned},
          {"wrong_caught", m.wrong_caught},
          {"wrong_accepted", m.wrong_accepted},
          {"wrong_accepted_by_workload",
           {{"render", m.wrong_accepted_by_workload[kRender]}, {"matmul", m.wrong_accepted_by_workload[kMatmul]},
            {"exec", m.wrong_accepted_by_workload[kExec]}}},
          {"new_devices_wrong_returned", m.new_wrong_returned},
          {"new_devices_wrong_accepted", m.new_wrong_accepted},
          {"cheaters", m.cheaters},
          {"cheaters_excluded", m.cheaters_excluded},
          {"honest_excluded", m.honest_excluded},
          {"new_cheaters", m.new_cheaters},
          {"new_cheaters_excluded", m.new_cheaters_excluded},
          {"decisions", m.decisions},
          {"decide_mean_us", m.decide_mean_us},
          {"decide_p50_us", m.decide_p50_us},
          {"decide_p99_us", m.decide_p99_us},
          {"decide_max_us", m.decide_max_us}};
}

std::unique_ptr<Policy> make(const std::string& name, const WorldConfig& c) {
  const std::uint64_t seed = c.seed;
  if (name == "ours") {
    std::vector<std::string> checked;
    if (c.render_checks) checked.push_back("render");
    if (c.matmul_checks) checked.push_back("matmul");
    return std::make_unique<OurScheduler>(seed, checked);
  }
  if (name == "round-robin") return std::make_unique<StaticDeal>(false, seed);
  if (name == "random") return std::make_unique<StaticDeal>(true, seed);
  if (name == "fcfs") return std::make_unique<Fcfs>();
  if (name == "fastest-first") return std::make_unique<FastestFirstBackups>(false);
  if (name == "fastest-first+backups") return std::make_unique<FastestFirstBackups>(true);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"poolsim: the pool scheduler against baselines on a simulated GPU pool"};
  WorldConfig c;
  bool quick = false, as_json = false;
  std::vector<std::string> policies = {"ours", "round-robin", "random", "fcfs", "fastest-first", "fastest-first+backups"};
  app.add_option("--devices", c.devices, "devices in the pool")->check(CLI::Range(10, 1000000));
  app.add_option("--tasks", c.tasks, "tasks in the measured batch (four jobs)")->check(CLI::Range(10, 10000000));
  app.add_option("--warmup", c.warmup_tasks, "tasks run before it (learning, trust); 0 for a cold start")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--seed", c.seed, "random seed");
  app.add_option("--prefer", c.prefer, "job preference: fast, cheap, balanced, or mixed (per job)")
      ->check(CLI::IsMember({"fast", "cheap", "balanced", "mixed"}));
  app.add_option("--cheaters", c.cheater_share, "share of devices that cheat")->check(CLI::Range(0.0, 1.0));
  app.add_option("--new-share", c.new_share, "share of the initial honest devices with no record yet")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--trust-proving", c.trust.proving_run, "results replicated every time until this many in a row are valid")
      ->check(CLI::Range(0, 1000));
  app.add_option("--trust-falloff", c.trust.falloff, "then replicated with probability falloff / run ...")
      ->check(CLI::Range(0.0, 1000.0));
  app.add_option("--trust-floor", c.trust.min_probability, "... but never less than this")->check(CLI::Range(0.0, 1.0));
  app.add_option("--known-answers", c.trust.known_answer_tasks, "hidden known-answer tasks per new device")
      ->check(CLI::Range(0, 100));
  std::string checks = "render,matmul";
  app.add_option("--checks", checks,
                 "which workloads the coordinator checks by computation: render (pixel spot checks), matmul "
                 "(Freivalds); the others are replicated like exec. \"none\": the model before issue 16 "
                 "(default render,matmul)")
      ->check(CLI::IsMember({"render,matmul", "matmul,render", "render", "matmul", "none"}));
  app.add_option("--exec-spot-check", c.exec_spot_check,
                 "least share of the batch job's results replicated (its --spot-check; default 0)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--colluding", c.colluding,
               "cheaters collude: all return the same wrong value for a task (Sybils on rented networks)");
  std::string vouched = "on";
  app.add_option("--vouched-quorums", vouched,
                 "on: a quorum decides only with a party vouched for (a record of 3 valid checks), as the "
                 "coordinator since issue 37; off: independent networks suffice (the model before)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--policies", policies, "which policies to run")
      ->check(CLI::IsMember({"ours", "round-robin", "random", "fcfs", "fastest-first", "fastest-first+backups"}));
  app.add_option("--trace", c.trace_s, "print the pool's state to stderr every this many simulated seconds");
  app.add_flag("--quick", quick, "1,000 devices and 10,000 tasks (a few seconds)");
  app.add_flag("--json", as_json, "print one JSON object instead of the table");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    if (app.count("--devices") == 0) c.devices = 1000;
    if (app.count("--tasks") == 0) c.tasks = 10000;
  }
  if (app.count("--warmup") == 0) c.warmup_tasks = c.tasks / 10;
  c.vouched_quorums = vouched == "on";
  c.render_checks = checks.find("render") != std::string::npos;
  c.matmul_checks = checks.find("matmul") != std::string::npos;

  std::vector<Metrics> results;
  for (const auto& name : policies) {
    auto policy = make(name, c);
    auto started = std::chrono::steady_clock::now();
    results.push_back(simulate(c, *policy));
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!as_json) std::fprintf(stderr, "poolsim: %s simulated in %.1f s\n", name.c_str(), wall);
  }

  const Metrics* ours = nullptr;
  for (const auto& m : results)
    if (m.policy == "ours") ours = &m;
  json comparisons = json::array();
  if (ours)
    for (const auto& m : results) {
      if (&m == ours) continue;
      comparisons.push_back({{"baseline", m.policy},
                             {"makespan_ratio", ours->makespan_s / m.makespan_s},
                             {"utilisation_ratio", ours->utilisation() / m.utilisation()},
                             {"cost_ratio", ours->cost / m.cost},
                             {"paid_ratio", ours->paid / m.paid}});
    }
  json goals = json::object();
  auto find = [&](const std::string& name) -> const Metrics* {
    for (const auto& m : results)
      if (m.policy == name) return &m;
    return nullptr;
  };
  if (ours) {
    if (const auto* rr = find("round-robin")) {
      goals["makespan_40pct_below_round_robin"] = ours->makespan_s <= 0.6 * rr->makespan_s;
      goals["utilisation_25pct_above_round_robin"] = ours->utilisation() >= 1.25 * rr->utilisation();
    }
    if (const auto* ff = find("fastest-first+backups")) {
      goals["makespan_15pct_below_fastest_first"] = ours->makespan_s <= 0.85 * ff->makespan_s;
      goals["cost_not_above_fastest_first"] = ours->cost <= ff->cost;
    }
    goals["decision_under_50us"] = ours->decide_mean_us < 50;
    goals["verification_under_5pct"] = ours->verification_share() < 0.05;
    goals["cheaters_caught"] = ours->wrong_caught > 0 && ours->cheaters_excluded > 0;
  }

  if (as_json) {
    json out = {{"devices", c.devices}, {"tasks", c.tasks}, {"warmup_tasks", c.warmup_tasks}, {"seed", c.seed},
                {"prefer", c.prefer},   {"results", json::array()}, {"comparisons", comparisons}, {"goals", goals}};
    for (const auto& m : results) out["results"].push_back(to_json(m));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  std::printf("poolsim: %d devices (GTX 1060 .. H100 tiers), %d tasks in 4 jobs after a %d-task warm-up, seed %llu, "
              "preference %s\n\n",
              c.devices, c.tasks, c.warmup_tasks, static_cast<unsigned long long>(c.seed), c.prefer.c_str());
  std::printf("%-22s %10s %6s %6s %9s %9s %7s %7s %7s %14s %16s\n", "policy", "makespan", "util", "busy", "cost $",
              "paid $", "wasted", "verif", "backups", "wrong caught/", "decide us");
  std::printf("%-22s %10s %6s %6s %9s %9s %7s %7s %7s %14s %16s\n", "", "s", "", "", "", "", "", "", "",
              "accepted", "mean / p99");
  for (const auto& m : results)
    std::printf("%-22s %10.0f %5.1f%% %5.1f%% %9.2f %9.2f %6.1f%% %6.1f%% %7lld %7lld/%-6lld %7.2f / %-7.2f%s\n",
                m.policy.c_str(), m.makespan_s, 100 * m.utilisation(), 100 * m.busy_share(), m.cost, m.paid,
                100 * m.wasted_share(), 100 * m.verification_share(), static_cast<long long>(m.backups),
                static_cast<long long>(m.wrong_caught), static_cast<long long>(m.wrong_accepted), m.decide_mean_us,
                m.decide_p99_us, m.finished ? "" : "  (unfinished)");
  if (ours) {
    std::printf("\nours against each baseline (ratio ours/baseline):\n");
    for (const auto& cmp : comparisons)
      std::printf("  %-22s makespan %.3f (%+.1f%%)  utilisation %.3f (%+.1f%%)  cost %.3f  paid %.3f\n",
                  cmp["baseline"].get<std::string>().c_str(), cmp["makespan_ratio"].get<double>(),
                  100 * (cmp["makespan_ratio"].get<double>() - 1), cmp["utilisation_ratio"].get<double>(),
                  100 * (cmp["utilisation_ratio"].get<double>() - 1), cmp["cost_ratio"].get<double>(),
                  cmp["paid_ratio"].get<double>());
    std::printf("\nverification (ours): %.1f%% of compute (replicas %.1f%%, known-answer %.1f%%, tie breaks %.1f%%, "
                "audits %.1f%%, checks by computation %.2f%%); %lld replicas, %lld known-answer tasks, %lld tie "
                "breaks, %lld audits\n",
                100 * ours->verification_share(), 100 * ours->replica_s / ours->total_s,
                100 * ours->known_answer_s / ours->total_s, 100 * ours->tie_break_s / ours->total_s,
                100 * ours->audit_s / ours->total_s, 100 * ours->check_s / ours->total_s,
                static_cast<long long>(ours->replicas),
                static_cast<long long>(ours->known_answer_tasks), static_cast<long long>(ours->tie_breaks),
                static_cast<long long>(ours->audits));
    std::printf("cheating (ours): wrong results returned %lld, caught %lld, accepted %lld (from cheaters that joined "
                "new: %lld returned, %lld accepted); cheaters excluded %lld of %lld seen (joined new: %lld of %lld), "
                "honest devices excluded %lld\n",
                static_cast<long long>(ours->wrong_returned),
                static_cast<long long>(ours->wrong_caught), static_cast<long long>(ours->wrong_accepted),
                static_cast<long long>(ours->new_wrong_returned), static_cast<long long>(ours->new_wrong_accepted),
                static_cast<long long>(ours->cheaters_excluded), static_cast<long long>(ours->cheaters),
                static_cast<long long>(ours->new_cheaters_excluded), static_cast<long long>(ours->new_cheaters),
                static_cast<long long>(ours->honest_excluded));
    std::printf("wrong results accepted by workload (ours): render %lld, matmul %lld, exec %lld\n",
                static_cast<long long>(ours->wrong_accepted_by_workload[kRender]),
                static_cast<long long>(ours->wrong_accepted_by_workload[kMatmul]),
                static_cast<long long>(ours->wrong_accepted_by_workload[kExec]));
    std::printf("scheduler time per decision (ours, wall-clock, %d devices): mean %.2f us, median %.2f, p99 %.2f, "
                "max %.0f over %lld decisions\n",
                c.devices, ours->decide_mean_us, ours->decide_p50_us, ours->decide_p99_us, ours->decide_max_us,
                static_cast<long long>(ours->decisions));
    std::printf("\ngoals:\n");
    for (const auto& [k, v] : goals.items()) std::printf("  %-40s %s\n", k.c_str(), v.get<bool>() ? "met" : "NOT met");
  }
  return 0;
}
