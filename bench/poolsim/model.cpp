#include "model.hpp"

#include <cmath>

namespace poolsim {

std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  auto step = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  return step(step(step(step(a) ^ b) ^ c) ^ d);
}

double unit(std::uint64_t key) { return static_cast<double>(mix(key) >> 11) * 0x1.0p-53; }

namespace {

double normal(std::uint64_t key) {
  double u1 = 1.0 - unit(key), u2 = unit(key ^ 0x5bd1e995ULL);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

const char* workload_name(Workload w) {
  switch (w) {
    case kRender: return "render";
    case kMatmul: return "matmul";
    case kExec: return "exec";
    default: return "?";
  }
}

const std::vector<Tier>& tiers() {
  // Benchmark ratios follow FP32 throughput (GTX 1060 ~4.4 TFLOPS .. H100 ~67);
  // matmul gains from tensor cores where a card has them; exec (CPU and
  // memory bound batch work) gains little from a bigger card. Prices are
  // typical rental marketplace $/h.
  static const std::vector<Tier> t = {
      {"gtx1060", 1.0, 0.04, 0.14, {1.0, 0.7, 1.0}, false},
      {"gtx1080ti", 2.2, 0.08, 0.10, {1.0, 0.75, 1.0}, false},
      {"rtx2080ti", 3.0, 0.12, 0.10, {1.0, 1.3, 0.9}, false},
      {"rtx3060", 2.4, 0.07, 0.14, {1.0, 1.1, 1.0}, false},
      {"rtx3080", 4.8, 0.14, 0.12, {1.0, 1.1, 0.85}, false},
      {"rtx3090", 5.5, 0.20, 0.12, {1.0, 1.2, 0.85}, false},
      {"rtx4090", 9.5, 0.35, 0.14, {1.0, 1.2, 0.75}, false},
      {"a100", 9.0, 0.80, 0.08, {0.9, 2.0, 0.7}, true},
      {"h100", 16.0, 2.00, 0.06, {0.9, 2.2, 0.6}, true},
  };
  return t;
}

DeviceSpec device_spec(const WorldConfig& c, int slot, int identity) {
  const std::uint64_t k = mix(c.seed, 0xde71ce, static_cast<std::uint64_t>(slot), static_cast<std::uint64_t>(identity));
  DeviceSpec d;
  d.id = "d" + std::to_string(slot) + (identity ? "." + std::to_string(identity) : "");
  double u = unit(k ^ 1), acc = 0;
  d.tier = static_cast<int>(tiers().size()) - 1;
  for (std::size_t i = 0; i < tiers().size(); ++i) {
    acc += tiers()[i].share;
    if (u < acc) {
      d.tier = static_cast<int>(i);
      break;
    }
  }
  const auto& t = tiers()[d.tier];
  // Calibration is a short benchmark: close to the tier, a little noisy.
  d.score = 1000.0 * t.bench * std::exp(0.1 * normal(k ^ 2));
  // Real speed: host, clocks and cooling vary; some cards are throttled or
  // shared and run far below what their benchmark said.
  double host = std::exp(0.2 * normal(k ^ 3));
  if (unit(k ^ 4) < c.throttled_share) host *= 0.3 + 0.3 * unit(k ^ 5);
  for (int w = 0; w < kWorkloads; ++w) d.speed[w] = t.bench * t.factor[w] * host;
  d.price_per_hour = t.price_per_hour * std::exp(0.15 * normal(k ^ 6));
  bool flaky = unit(k ^ 7) < c.flaky_share;
  d.fail_p = flaky ? 0.08 : 0.01;
  d.session_s = flaky ? c.flaky_session_s : c.session_s;
  d.cheater = unit(k ^ 8) < c.cheater_share;
  d.cheat_p = d.cheater ? 0.1 + 0.5 * unit(k ^ 9) : 0.0;
  // Initial devices mostly have a record; replacements are new. Half the
  // cheaters are new devices, half turned after an honest record (the
  // record is all they show until they are caught).
  bool fresh = d.cheater ? unit(k ^ 10) < 0.5 : unit(k ^ 10) < c.new_share;
  if (identity == 0 && !fresh) d.history = static_cast<int>(std::exp(std::log(150.0) + normal(k ^ 11)));
  // Peers: datacenter machines hold 4-8 cards and share a few networks;
  // home machines hold 1-2 cards and mostly have a network each.
  if (t.datacenter) {
    int machine = slot / 6;
    d.peer = "dc-peer-" + std::to_string(machine) + "." + std::to_string(identity);
    d.network = "dc-net-" + std::to_string(mix(c.seed, 0xdc, static_cast<std::uint64_t>(machine)) % 24);
  } else {
    int machine = slot / 2;
    d.peer = "home-peer-" + std::to_string(machine) + "." + std::to_string(identity);
    bool shared = unit(mix(c.seed, 0x5a, static_cast<std::uint64_t>(machine))) < 0.2;
    d.network = shared ? "isp-net-" + std::to_string(mix(c.seed, 0x15, static_cast<std::uint64_t>(machine)) % 500)
                       : "home-net-" + std::to_string(machine);
  }
  return d;
}

std::vector<JobSpec> job_specs(const WorldConfig& c) {
  struct Mix {
    const char* name;
    Workload w;
    double share, mean, sigma;
    const char* prefer;
  };
  // A 4K render in tiles, block matrix products, a batch of commands and a
  // preview render: different task sizes and workloads in one pool.
  const Mix mixes[] = {{"render-4k", kRender, 0.40, 120, 0.5, "fast"},
                       {"matmul", kMatmul, 0.20, 200, 0.1, "balanced"},
                       {"batch", kExec, 0.25, 60, 0.7, "balanced"},
                       {"preview", kRender, 0.15, 20, 0.4, "fast"}};
  std::vector<JobSpec> out;
  auto add = [&](int total, double submit, bool measured, const char* prefix) {
    for (const auto& m : mixes) {
      JobSpec j;
      j.id = std::string(prefix) + m.name;
      j.workload = m.w;
      j.preference = c.prefer == "mixed" ? m.prefer : c.prefer;
      j.tasks = std::max(1, static_cast<int>(std::lround(total * m.share)));
      j.sigma = m.sigma;
      j.mean_work = m.mean;
      j.submit_s = submit;
      j.measured = measured;
      out.push_back(j);
    }
  };
  if (c.warmup_tasks > 0) add(c.warmup_tasks, 0, false, "warmup-");
  add(c.tasks, c.warmup_tasks > 0 ? c.warmup_s : 0, true, "");
  return out;
}

double task_work(const WorldConfig& c, int job, int index, const JobSpec& spec) {
  // Log-normal with the declared mean.
  double z = normal(mix(c.seed, 0x7a5c, static_cast<std::uint64_t>(job), static_cast<std::uint64_t>(index)));
  return spec.mean_work * std::exp(spec.sigma * z - 0.5 * spec.sigma * spec.sigma);
}

}  // namespace poolsim
