// `runsnack pool ...`: the compute pool (docs/ARCHITECTURE.md section 7).
// serve (the coordinator: cmd_pool_serve.cpp), join (a worker), submit/status/jobs/cancel/credits
// (a consumer, by the submit link) and audit-ledger (on the coordinator's
// own database).
#include "cli/command.hpp"
#include "cli/gpu_arg.hpp"
#include "cli/link_arg.hpp"
#include "cli/pool_client.hpp"
#include "cli/pool_links.hpp"
#include "cli/pool_train.hpp"
#include "cli/pool_serve.hpp"
#include "cli/pool_replies.hpp"
#include "cli/session_runner.hpp"
#include "cli/state.hpp"
#include "consumer/consumer.hpp"
#include "core/duration.hpp"
#include "core/json_fields.hpp"
#include "core/log_exceptions.hpp"
#include "core/paths.hpp"
#include "gpu/gpu_info.hpp"
#include "sandbox/run_terms.hpp"
#include "crypto/secret.hpp"
#include "pool/coordinator.hpp"
#include "pool/device_runs.hpp"
#include "pool/pool_store.hpp"
#include "pool/wire.hpp"
#include "pool/worker.hpp"
#include "pool/workload.hpp"
#include "pool/workloads/builtin.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <fstream>
#include <optional>
#include <iostream>
#include <sstream>

#include <unistd.h>

namespace runsnack::cli {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct JoinArgs {
  std::string link, gpus, memory, task_timeout = "1h";
  bool cpu = false, gpu_given = false;
  double price = 10;
  std::int64_t max_tasks = 0, max_procs = 512;
  std::optional<std::int64_t> max_task_seconds;  // none: no cap
};

// The device this worker offers: its GPUs (NVML) or, with --cpu, its CPU.
Result<void> choose_device(const JoinArgs& args, pool::WorkerOptions& opt) {
  if (args.cpu == args.gpu_given) return fail(errc::invalid_argument, "pool join: offer either --gpu LIST or --cpu");
  if (args.cpu) return {};
  auto indices = parse_gpu_list(args.gpus);
  if (!indices) return indices.error();
  GpuReport report = query_gpus(*indices);
  if (report.gpus.empty())
    return fail(errc::not_found, "pool join: no NVIDIA GPU to offer (" +
                                     (report.note.empty() ? std::string("NVML found none") : report.note) +
                                     "); offer the CPU with --cpu instead");
  opt.device_kind = "gpu";
  opt.device_name = (report.gpus.size() > 1 ? std::to_string(report.gpus.size()) + "x " : "") + report.gpus[0].name;
  for (const auto& g : report.gpus) opt.limits.gpus.push_back(g.index);
  return {};
}

int join(const JoinArgs& args) {
  pool::WorkerOptions opt;
  if (auto d = choose_device(args, opt); !d) return report(d.error());
  if (!args.memory.empty()) {
    auto bytes = exec::parse_size(args.memory);
    if (!bytes) return report(bytes.error());
    opt.limits.memory_bytes = *bytes;
  }
  auto timeout = parse_duration(args.task_timeout);
  if (!timeout) return report(timeout.error());
  opt.limits.timeout = *timeout;
  if (args.max_procs < 1) return report("--max-procs must be at least 1");
  opt.limits.max_procs = static_cast<std::uint64_t>(args.max_procs);
  if (args.max_task_seconds) {
    if (*args.max_task_seconds < 1 || *args.max_task_seconds > pool::kMaxTaskSecondsLimit)
      return report("--max-task-seconds must be in 1.." + std::to_string(pool::kMaxTaskSecondsLimit));
    opt.max_task_seconds = args.max_task_seconds;
  }
  auto link = resolve_link(args.link);
  if (!link) return report(link.error());
  auto identity = open_identity();
  if (!identity) return report(identity.error());
  auto consumer = Consumer::create(*identity);
  if (!consumer) return report(consumer.error());
  auto work = state_path("pool-work");
  if (!work) return report(work.error());
  opt.link = *link;
  opt.price = args.price;
  opt.max_tasks = args.max_tasks;
  opt.work_dir = *work;
  if (auto sd = state_dir()) opt.hidden.push_back(*sd);
  if (const char* home = std::getenv("HOME")) opt.hidden.emplace_back(home);
  if (const char* fault = std::getenv("RUNSNACK_POOL_FAULT")) opt.fault = fault;
  asio::io_context io(1);
  int code = kExitFailure;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) io.stop();
  });
  asio::co_spawn(io, pool::run_worker(consumer->get(), &*identity, opt), [&](std::exception_ptr e, int rc) {
    signals.cancel();  // the worker is done: let io.run() return
    if (e) return log_exceptions("pool worker")(e);
    code = rc;
  });
  io.run();
  return code;
}

// --- consumer commands over the submit link -----------------------------------

struct SubmitArgs {
  std::string link, workload, budget = "0", out, prefer;
  bool wait = false, json = false, allow_failures = false;
  int retries = 0;
  pool::SubmitOptions options;
  TrainArgs train;  // train's own options (pool_train.hpp)
  // Set once submitted: a reconnect after a lost session carries on waiting
  // for this job instead of submitting again (copies share it).
  std::shared_ptr<std::string> job = std::make_shared<std::string>();
};

// `pool submit --wait`'s progress: on a terminal a bar redrawn in place,
// "[#####.....] 40/80 done, 3 running, 0 failed, 0.12 credits spent".
std::string progress_line(const json& status, bool bar) {
  auto num = [&](const char* key) -> std::int64_t {
    return status.contains(key) && status[key].is_number_integer() ? status[key].get<std::int64_t>() : 0;
  };
  std::int64_t tasks = num("tasks"), done = num("done");
  std::string spent = status.contains("credits_spent") && status["credits_spent"].is_string()
                          ? status["credits_spent"].get<std::string>() : "0";
  std::string line;
  if (bar) {
    constexpr std::int64_t kWidth = 30;
    std::int64_t filled = tasks > 0 ? std::min(kWidth, done * kWidth / tasks) : 0;
    line = "[" + std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(kWidth - filled), '.') + "] ";
  }
  line += std::to_string(done) + "/" + std::to_string(tasks) + " done, " + std::to_string(num("running")) +
          " running, " + std::to_string(num("failed")) + " failed, " + spent + " credits spent";
  return line;
}

asio::awaitable<int> submit_body(SubmitArgs args, Session& session) {
  const pool::Workload* workload = pool::find_workload(args.workload);
  if (!workload) co_return report("unknown workload '" + args.workload + "': choose one of " + pool::workload_names());
  auto budget = pool::parse_credits(args.budget);
  if (!budget) co_return report(budget.error());
  json input;
  auto spec = workload->make_spec(args.options, input);
  if (!spec) co_return report(spec.error());
  auto stream = co_await open_pool_client(session);
  if (!stream) co_return args.job->empty() ? report(stream.error()) : lost_or_refused(stream.error());
  if (args.job->empty()) {
    json request = {{"op", "submit"}, {"workload", args.workload}, {"spec", *spec}, {"input", input},
                    {"budget", *budget}};
    if (!args.prefer.empty()) request["prefer"] = args.prefer;
    if (args.retries > 0) request["retries"] = args.retries;
    if (args.allow_failures) request["allow_failures"] = true;
    auto r = co_await call_pool(**stream, request);
    if (!r) co_return report(r.error());
    *args.job = (*r)["job"].get<std::string>();
    std::int64_t tasks = int_or(*r, "tasks", std::int64_t{0});
    const bool free_only = bool_or(*r, "free_only", false);
    if (args.json) {
      json ev = {{"event", "submitted"}, {"job", *args.job}, {"tasks", tasks}, {"free_only", free_only}};
      if (r->contains("note")) ev["note"] = (*r)["note"];
      print_json(ev);
    } else {
      std::cerr << "job " << *args.job << " submitted (" << tasks << " tasks)" << std::endl;
      if (free_only) std::cerr << "note: " << string_or(*r, "note") << std::endl;
    }
    if (!args.wait) {
      if (!args.json) std::cout << *args.job << std::endl;
      co_return 0;
    }
  }
  const std::string job = *args.job;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  json status;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  std::string last_line;
  while (true) {
    const json st_request = {{"op", "jobs"}, {"job", job}};
    auto st = co_await call_pool(**stream, st_request);
    if (!st) co_return lost_or_refused(st.error());
    if ((*st)["jobs"].empty()) co_return report("job " + job + " vanished");
    status = (*st)["jobs"][0];
    if (!args.json) {
      std::string line = progress_line(status, tty);
      if (tty) std::cerr << "\r" << line << "\x1b[K" << std::flush;  // redrawn in place
      else if (line != last_line) std::cerr << line << std::endl;    // a log: one line per change
      last_line = line;
    }
    if (status["state"] != "running") break;
    timer.expires_after(std::chrono::milliseconds(250));
    co_await timer.async_wait(asio::use_awaitable);
  }
  if (!args.json && tty) std::cerr << std::endl;
  // exec keeps every shard's folder in the output; the others merge them
  // into one result and drop them.
  fs::path out = args.out.empty() ? fs::path("pool-" + job) : fs::path(args.out);
  const bool keep_shards = args.workload == "exec";
  // --out may name a file (render: image.png); the tiles wait beside it.
  const fs::path out_dir = out.has_extension() && !keep_shards ? (out.has_parent_path() ? out.parent_path() : ".") : out;
  fs::path shards = keep_shards ? out : out_dir / (".shards-" + job);
  std::error_code ec;
  fs::create_directories(shards, ec);
  if (ec) co_return report("cannot create " + shards.string() + ": " + ec.message());
  const std::int64_t fetch = workload->has_results() ? int_or(status, "tasks", std::int64_t{0}) : 0;
  for (std::int64_t i = 0; i < fetch; ++i) {
    const json rr = {{"op", "result"}, {"job", job}, {"shard", i}};
    auto res = co_await call_pool(**stream, rr);
    if (!res) co_return lost_or_refused(res.error());
    if ((*res)["result"].is_null()) continue;
    fs::path dir = shards / ("shard-" + std::to_string(i));
    auto so = pool::base64_decode(string_or((*res)["result"], "stdout"));
    if (so)
      if (auto w = pool::write_file(dir / "stdout", *so); !w) co_return report(w.error());
    for (const auto& f : field_or((*res)["result"], "files", json::array())) {
      std::string rel = string_or(f, "path");
      auto data = pool::base64_decode(string_or(f, "data"));
      if (rel.empty() || rel.front() == '/' || rel.find("..") != std::string::npos || rel == "stdout" || !data) continue;
      if (auto w = pool::write_file(dir / rel, *data); !w) co_return report(w.error());
    }
  }
  std::string state = status["state"];
  json done = {{"event", "done"},          {"job", job},     {"state", state},
               {"tasks", status["tasks"]}, {"failed", status["failed"]},
               {"credits_spent", status["credits_spent"]}, {"out", fs::absolute(out).string()},
               {"reason", status["reason"]}, {"verification", status["verification"]},
               {"failures", field_or(status, "failures", json::array())}};
  const json& verification = status["verification"];
  if (int_or(verification, "unverified", 0) > 0)
    done["note"] = std::to_string(int_or(verification, "unverified", 0)) +
                   " shard(s) unverified: no quorum of independent parties (copies on different networks and "
                   "PeerIds) could be formed";
  if (state == "done") {
    auto merged = workload->merge(*spec, int_or(status, "tasks", std::int64_t{0}), shards, out);
    if (!merged) co_return report(merged.error());
    for (const auto& [k, v] : merged->items()) done[k] = v;
  }
  if (!keep_shards) fs::remove_all(shards, ec);
  if (args.json) print_json(done);
  else {
    std::cout << "job " << job << " " << state << "; outputs in " << out.string() << std::endl;
    if (!string_or(status, "reason").empty()) std::cout << "reason: " << string_or(status, "reason") << std::endl;
    for (const auto& f : done["failures"])
      std::cout << "shard " << int_or(f, "shard", -1) << " failed with exit code " << int_or(f, "exit_code", 0)
                << (string_or(f, "stderr").empty() ? "" : ", stderr:\n" + string_or(f, "stderr")) << std::endl;
    const json& v = status["verification"];
    if (v.is_object() && string_or(v, "method", "none") != "none")
      std::cout << "checked by " << string_or(v, "method") << ": " << int_or(v, "checked", 0) << " checked, "
                << int_or(v, "rejected", 0) << " rejected, cost " << number_or(v, "cost_fraction", 0.0) * 100
                << "% of compute" << std::endl;
    if (done.contains("note")) std::cout << "NOT verified: " << done["note"].get<std::string>() << std::endl;
  }
  co_return state == "done" ? 0 : kExitFailure;
}

asio::awaitable<int> simple_body(json request, bool as_json, Session& session) {
  auto stream = co_await open_pool_client(session);
  if (!stream) co_return report(stream.error());
  auto r = co_await call_pool(**stream, request);
  if (!r) co_return report(r.error());
  r->erase("ok");
  if (as_json) print_json(*r);
  else print_pool_reply(string_or(request, "op"), *r, string_or(request, "job"), std::cout);
  std::cout << std::flush;
  co_return 0;
}

int audit_ledger(const std::string& db, bool as_json) {
  std::string shown;
  auto store = open_pool_store(db, {}, shown, true);
  if (!store) return report(store.error());
  auto r = store->audit();
  if (!r) return report(r.error());
  json out = {{"ok", r->ok}, {"transactions", r->transactions}, {"entries", r->entries},
              {"minted", pool::format_credits(r->minted)}, {"problems", r->problems},
              {"checks", {"every transaction sums to zero", "no balance is negative (mint excepted)",
                          "every payment is tied to a done task, paid once, to its finisher",
                          "every payment within its lease's terms (price and measured score when leased, run time)"}}};
  if (as_json) print_json(out);
  else {
    std::cout << (r->ok ? "ledger OK" : "ledger BROKEN") << ": " << r->transactions << " transactions, " << r->entries
              << " entries, " << pool::format_credits(r->minted) << " credits minted" << std::endl;
    for (const auto& p : r->problems) std::cout << "  " << p << std::endl;
  }
  return r->ok ? 0 : kExitFailure;
}

}  // namespace

void add_pool_command(CLI::App& app, ExitStatus& status) {
  auto* pool = app.add_subcommand("pool", "A compute pool: a coordinator, workers, jobs and a credit ledger");
  pool->require_subcommand(1);

  add_pool_serve_command(*pool, status);

  auto ja = std::make_shared<JoinArgs>();
  auto* join_cmd = pool->add_subcommand("join", "Lend this machine to a pool as a worker");
  join_cmd->add_option("link", ja->link, kPoolJoinLinkHelp);
  join_cmd->add_flag("--cpu", ja->cpu, "Offer this machine's CPU");
  join_cmd->add_option("--gpu", ja->gpus, "Offer these GPUs (NVML indices: 0 or 0,1 or all); tasks see only them")
      ->each([ja](const std::string&) { ja->gpu_given = true; });
  join_cmd->add_option("--memory", ja->memory, "Memory limit per task, e.g. 8G (cgroup, else RLIMIT_AS)");
  join_cmd->add_option("--max-procs", ja->max_procs, "Processes per task (default 512)");
  join_cmd->add_option("--task-timeout", ja->task_timeout, "Wall-clock limit per task, e.g. 30m (default 1h)");
  join_cmd->add_option("--price", ja->price, "Credits per device-hour (default 10)");
  join_cmd->add_option("--max-tasks", ja->max_tasks, "Exit after this many accepted tasks");
  join_cmd->add_option("--max-task-seconds", ja->max_task_seconds,
                       "Take only tasks the pool expects this device to finish within N seconds (1..86400)");
  join_cmd->callback([&status, ja] { run_command(status, [&] { return join(*ja); }); });

  auto su = std::make_shared<SubmitArgs>();
  auto* submit_cmd = pool->add_subcommand(
      "submit",
      "Submit a job:\n"
      "  submit LINK exec --shards N [--input DIR] [--reduce CMD] [--replicas R | --spot-check F] -- CMD ARGS\n"
      "  submit LINK matmul --n 4096 --block 1024 [--seed S | --a A.npy --b B.npy] [--rounds K]\n"
      "  submit LINK render --scene FILE --width 3840 --height 2160 --tile 128 --overlap 8 --spp N --out image.png\n"
      "  submit LINK noop --shards N      (tasks that do nothing: measures the pool's own cost)\n"
      "  submit LINK train --script train.py --init model.safetensors --data DIR --workers N --rounds R\n"
      "                    --local-steps K [--outer-lr 0.7 --outer-momentum 0.9] [--wait --out DIR]\n"
      "  submit LINK train --resume TRAINING --wait   (Ctrl-C stops waiting, not the training)\n"
      "Training (examples/train/README.md): rounds of local SGD, one task a worker on its shard of --data, averaged\n"
      "on the coordinator; each update is checked before it is paid. --data: .npy arrays split by records, or\n"
      "files dealt out in turn; script and data at most 4 MiB, weights at most 4 MiB.");
  submit_cmd->add_option("link", su->link, kPoolSubmitLinkHelp)->required();
  submit_cmd->add_option("workload", su->workload, "exec | matmul | render | noop | train")->required();
  submit_cmd->add_option("--budget", su->budget,
                         "Credits to escrow for the job; workers are paid from it at the price their lease was given "
                         "at. Without one the job runs on free workers (price 0) only");
  submit_cmd->add_option("--retries", su->retries,
                         "Run a shard whose command exits non-zero again on another worker, up to N times (default 0)")
      ->check(CLI::Range(0, 100));
  submit_cmd->add_flag("--allow-failures", su->allow_failures,
                       "Failed shards do not fail the job: it ends done, with the failures reported");
  submit_cmd->add_option("--prefer", su->prefer, "fast | cheap | balanced: what the learned scheduler optimises")
      ->check(CLI::IsMember({"fast", "cheap", "balanced"}));
  submit_cmd->add_flag("--wait", su->wait, "Wait for the job and collect its outputs (reconnecting if the coordinator goes away)");
  submit_cmd->add_option("--out", su->out, "Output folder (default pool-JOB); render: the image file, e.g. image.png");
  submit_cmd->add_flag("--json", su->json, "JSON lines; the last is {\"event\":\"done\",...}");
  auto& o = su->options;
  submit_cmd->add_option("--shards", o.shards, "exec, noop: tasks to split into")->check(CLI::Range(1, 100000));
  submit_cmd->add_option("--input", o.input_dir, "exec: a folder copied into every shard's workspace");
  submit_cmd->add_option("--reduce", o.reduce, "exec: run this in the output folder afterwards (default: concatenate stdout)");
  submit_cmd->add_option("--n", o.n, "matmul: multiply two seeded N x N matrices");
  submit_cmd->add_option("--block", o.block, "matmul: tile size of C, one task per tile (default min(N, 1024))");
  submit_cmd->add_option("--seed", o.seed, "matmul: seed of the generated A and B; render: of the samples; train: of round 0 (default 1)");
  submit_cmd->add_option("--scene", o.scene_file, "render: the scene file (docs/SCENES.md)");
  submit_cmd->add_option("--width", o.width, "render: image width in pixels (default 1920)");
  submit_cmd->add_option("--height", o.height, "render: image height in pixels (default 1080)");
  submit_cmd->add_option("--tile", o.tile, "render: tile side, one task per tile (default 128)");
  submit_cmd->add_option("--overlap", o.overlap, "render: border rendered around each tile and blended (default 8)");
  submit_cmd->add_option("--spp", o.spp, "render: samples per pixel (default 16)");
  submit_cmd->add_option("--max-depth", o.max_depth, "render: bounces per path (default 8)");
  submit_cmd->add_option("--a", o.a_file, "matmul: A as a float32 .npy file (with --b; 4 MiB in all)");
  submit_cmd->add_option("--b", o.b_file, "matmul: B as a float32 .npy file");
  submit_cmd->add_option("--replicas", o.replicas,
                         "exec: run every shard on R different peers and keep the result a majority agrees on (bit for bit)");
  submit_cmd->add_option("--spot-check", o.spot_check,
                         "exec: re-run at least this share of results on another peer (all of an unproven device's)");
  submit_cmd->add_option("--rounds", o.rounds, "matmul: Freivalds rounds per tile; a wrong tile passes with probability <= 2^-K; "
                                               "train: rounds of local training (default 10)");
  submit_cmd->add_option("--script", su->train.script, "train: the training script (the .py files beside it go too: runsnack_train.py, your modules)");
  submit_cmd->add_option("--init", su->train.init, "train: the initial weights, a safetensors file of float32 tensors");
  submit_cmd->add_option("--data", su->train.data, "train: the data folder, split into one shard per worker");
  submit_cmd->add_option("--workers", su->train.workers, "train: shards, and tasks a round")->check(CLI::Range(1, 64));
  submit_cmd->add_option("--local-steps", su->train.local_steps, "train: optimizer steps each worker takes a round (default 50)")
      ->check(CLI::Range(1, 1000000));
  submit_cmd->add_option("--outer-lr", su->train.outer_lr, "train: the outer optimizer's learning rate (default 0.7)");
  submit_cmd->add_option("--outer-momentum", su->train.outer_momentum, "train: its Nesterov momentum (default 0.9)");
  submit_cmd->add_option("--check-fraction", su->train.check_fraction,
                         "train: least share of updates re-run on a device of another network and compared within 5% "
                         "(all of a new device's); 0: none, e.g. on one machine where no copy is independent (default 0.1)")
      ->check(CLI::Range(0.0, 1.0));
  submit_cmd->add_option("--round-timeout", su->train.round_timeout_s,
                         "train: seconds a round may run; then it closes with the updates that came (default 600)")
      ->check(CLI::Range(1, 7 * 86400));
  submit_cmd->add_option("--resume", su->train.resume, "train: wait for this training again (with --wait)");
  submit_cmd->add_option("--tolerance", o.tolerance, "matmul: relative tolerance of the check (default 1e-5)");
  submit_cmd->add_option("command", o.command, "exec: -- CMD ARGS ({shard} and {shards} substituted)");
  submit_cmd->callback([&status, su] {
    run_command(status, [&] {
      SessionCommand c;
      c.link_arg = su->link;
      c.served_by = "runsnack pool serve";
      if (su->workload == "train") {
        TrainArgs t = su->train;
        t.budget = su->budget, t.out = su->out, t.wait = su->wait, t.json = su->json;
        t.rounds = su->options.rounds, t.seed = static_cast<std::int64_t>(su->options.seed);
        c.body = [t](Session& s) { return train_body(t, s); };
      } else {
        c.body = [su](Session& s) { return submit_body(*su, s); };
      }
      return run_session_command(c);
    });
  });

  struct ClientArgs {
    std::string link, job;
    bool json = false;
  };
  auto add_client = [&](const char* name, const char* help, const char* op, bool needs_job) {
    auto ca = std::make_shared<ClientArgs>();
    auto* cmd = pool->add_subcommand(name, help);
    cmd->add_option("link", ca->link, kPoolSubmitLinkHelp)->required();
    if (needs_job) cmd->add_option("job", ca->job, "The job id")->required();
    cmd->add_flag("--json", ca->json, "One JSON object");
    std::string op_name = op;
    cmd->callback([&status, ca, op_name] {
      run_command(status, [&] {
        json req = {{"op", op_name}};
        if (!ca->job.empty()) req["job"] = ca->job;
        SessionCommand c;
        c.link_arg = ca->link;
        c.served_by = "runsnack pool serve";
        c.body = [req, as_json = ca->json](Session& s) { return simple_body(req, as_json, s); };
        return run_session_command(c);
      });
    });
  };
  add_client("status", "Devices, jobs and progress", "status", false);
  add_client("jobs", "Your jobs", "jobs", false);
  add_client("cancel", "Cancel one of your jobs, or stop one of your trainings (its id)", "cancel", true);
  add_client("credits", "Your balance and ledger entries", "credits", false);

  add_pool_bank_commands(*pool, status);

  auto aa = std::make_shared<std::pair<std::string, bool>>();
  auto* audit_cmd = pool->add_subcommand("audit-ledger", "Check the ledger's invariants (on the coordinator)");
  audit_cmd->add_option("--db", aa->first, "sqlite:PATH or postgres://... (default: pool.db in the state folder)");
  audit_cmd->add_flag("--json", aa->second, "One JSON object");
  audit_cmd->callback([&status, aa] { run_command(status, [&] { return audit_ledger(aa->first, aa->second); }); });
}

}  // namespace runsnack::cli
