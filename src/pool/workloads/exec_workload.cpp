// exec: a user command once per shard in the `runsnack run` sandbox
// (exec_task.hpp); the submitter concatenates stdout or runs --reduce.
#include "core/json_fields.hpp"
#include "pool/exec_task.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/builtin.hpp"

#include <cstdlib>

namespace runsnack::pool {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class ExecWorkload final : public Workload {
 public:
  std::string_view name() const override { return "exec"; }

  Result<json> make_spec(const SubmitOptions& o, json& input) const override {
    if (o.command.empty()) return fail(errc::invalid_argument, "exec needs a command after --");
    auto in = read_input_dir(o.input_dir, kMaxInputBytes);
    if (!in) return in.error();
    input = std::move(*in);
    if (o.replicas < 1 || o.replicas > 9) return fail(errc::invalid_argument, "--replicas must be 1..9");
    if (!(o.spot_check >= 0 && o.spot_check <= 1)) return fail(errc::invalid_argument, "--spot-check must be in [0, 1]");
    if (o.replicas > 1 && o.spot_check > 0) return fail(errc::invalid_argument, "give --replicas or --spot-check, not both");
    json spec = {{"argv", o.command}, {"shards", o.shards}, {"reduce", o.reduce}};
    if (o.replicas > 1) spec["replicas"] = o.replicas;
    if (o.spot_check > 0) spec["spot_check"] = o.spot_check;
    return spec;
  }

  Result<JobPlan> plan(const json& spec) const override {
    if (!spec.is_object() || !spec.contains("argv") || !spec["argv"].is_array() || spec["argv"].empty())
      return fail(errc::invalid_argument, "exec needs a command");
    for (const auto& a : spec["argv"])
      if (!a.is_string()) return fail(errc::invalid_argument, "exec: argv must be strings");
    const json& shards = spec.contains("shards") ? spec["shards"] : json(1);
    if (!shards.is_number_integer() || shards.get<std::int64_t>() < 1 || shards.get<std::int64_t>() > kMaxShards)
      return fail(errc::invalid_argument, "shards must be 1.." + std::to_string(kMaxShards));
    if (spec.contains("replicas") &&
        (!spec["replicas"].is_number_integer() || spec["replicas"].get<int>() < 1 || spec["replicas"].get<int>() > 9))
      return fail(errc::invalid_argument, "replicas must be 1..9");
    if (spec.contains("spot_check") &&
        (!spec["spot_check"].is_number() || !(spec["spot_check"].get<double>() >= 0 && spec["spot_check"].get<double>() <= 1)))
      return fail(errc::invalid_argument, "spot_check must be in [0, 1]");
    return JobPlan{shards.get<std::int64_t>(), "exec", json::object()};
  }

  // No computational check: results are compared between copies run on
  // independent peers (pool/replication.hpp), bit for bit.
  json verification_method(const json& spec) const override {
    if (int_or(spec, "replicas", 1) > 1)
      return {{"method", "replication"}, {"replicas", spec["replicas"]}, {"compare", "bit-for-bit"}};
    if (number_or(spec, "spot_check", 0.0) > 0)
      return {{"method", "spot-check"}, {"fraction", spec["spot_check"]}, {"compare", "bit-for-bit"}};
    return {{"method", "none"}};
  }

  boost::asio::awaitable<Result<TaskOutput>> run(TaskWork work) const override {
    std::vector<std::string> argv;
    for (const auto& a : work.spec["argv"]) argv.push_back(a.get<std::string>());
    ExecTaskRequest req;
    req.shard = work.index;
    req.shards = work.count;
    req.argv = substitute_shard(argv, req.shard, req.shards);
    req.input_dir = work.input_dir;
    req.task_dir = work.task_dir;
    req.hidden = work.hidden;
    req.limits = work.limits;
    req.timeout = work.limits.timeout;
    auto running = run_exec_task(std::move(req), work.tick);  // named: GCC 12 and temporaries around co_await
    co_return co_await std::move(running);
  }

  Result<json> merge(const json& spec, std::int64_t tasks, const fs::path& shards, const fs::path& out) const override {
    std::string reduce = string_or(spec, "reduce");
    if (!reduce.empty()) {
      std::string cmd = "cd '" + out.string() + "' && (" + reduce + ") > reduce.stdout";
      if (std::system(cmd.c_str()) != 0) return fail(errc::io_error, "--reduce failed (see " + (out / "reduce.stdout").string() + ")");
      return json::object();
    }
    std::string all;
    for (std::int64_t i = 0; i < tasks; ++i) {
      auto part = read_file(shards / ("shard-" + std::to_string(i)) / "stdout", 1ull << 32);
      if (part) all += *part;
    }
    if (auto w = write_file(out / "stdout", all); !w) return w.error();
    return json::object();
  }
};

}  // namespace

std::unique_ptr<Workload> make_exec_workload() { return std::make_unique<ExecWorkload>(); }

}  // namespace runsnack::pool
