// noop: tasks that do nothing, so the pool's own cost per task (leases,
// results, signatures, the ledger) can be measured (bench/pool_bench.py).
#include "pool/wire.hpp"
#include "pool/workloads/builtin.hpp"

namespace runsnack::pool {

namespace {

using json = nlohmann::json;

class NoopWorkload final : public Workload {
 public:
  std::string_view name() const override { return "noop"; }

  Result<json> make_spec(const SubmitOptions& o, json& input) const override {
    input = {{"files", json::array()}};
    return json{{"shards", o.shards}};
  }

  Result<JobPlan> plan(const json& spec) const override {
    const json& shards = spec.is_object() && spec.contains("shards") ? spec["shards"] : json(1);
    if (!shards.is_number_integer() || shards.get<std::int64_t>() < 1 || shards.get<std::int64_t>() > kMaxShards)
      return fail(errc::invalid_argument, "shards must be 1.." + std::to_string(kMaxShards));
    return JobPlan{shards.get<std::int64_t>(), "noop", json::object()};
  }

  bool has_results() const override { return false; }

  boost::asio::awaitable<Result<TaskOutput>> run(TaskWork) const override { co_return TaskOutput{}; }

  Result<json> merge(const json&, std::int64_t, const std::filesystem::path&, const std::filesystem::path&) const override {
    return json::object();
  }
};

}  // namespace

std::unique_ptr<Workload> make_noop_workload() { return std::make_unique<NoopWorkload>(); }

}  // namespace runsnack::pool
