#include "pool/trainer.hpp"

#include "core/json_fields.hpp"
#include "pool/training/outer_optimizer.hpp"
#include "pool/training/robust_average.hpp"
#include "pool/training/update_check.hpp"
#include "pool/wire.hpp"
#include "pool/worker_ops.hpp"
#include "pool/workloads/train_round.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace runsnack::pool {

using json = nlohmann::json;
namespace tr = training;

namespace {

json refuse(const Error& e) { return refusal(e.what()); }

// What a script printed last: {"loss": x, "samples": n, "accuracy": a}, each optional.
struct ScriptMetrics {
  std::optional<double> loss, accuracy;
  std::optional<std::uint64_t> samples;
};

ScriptMetrics metrics_of(const std::string& stdout_data) {
  ScriptMetrics m;
  std::string_view text(stdout_data);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
  const auto nl = text.rfind('\n');
  const std::string_view last = nl == std::string_view::npos ? text : text.substr(nl + 1);
  if (last.size() > 4096) return m;  // a metrics line is short
  const json j = json::parse(last, nullptr, false);
  if (!j.is_object()) return m;
  auto finite = [&](const char* key) -> std::optional<double> {
    if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
    const double v = j[key].get<double>();
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
  };
  m.loss = finite("loss");
  if (auto a = finite("accuracy"); a && *a >= 0 && *a <= 1) m.accuracy = a;
  if (j.contains("samples") && j["samples"].is_number_integer() && j["samples"].get<std::int64_t>() > 0 &&
      j["samples"].get<std::int64_t>() < (std::int64_t{1} << 40))
    m.samples = j["samples"].get<std::uint64_t>();
  return m;
}

bool plain_script_name(const std::string& name) {
  return !name.empty() && name.size() <= 200 && name.front() != '.' && name.front() != '-' &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

Result<TrainingSpec> TrainingSpec::parse(const json& spec) {
  if (!spec.is_object()) return fail(errc::invalid_argument, "a training's spec must be an object");
  TrainingSpec s;
  s.script = string_or(spec, "script");
  s.workers = int_or(spec, "workers", 0);
  s.rounds = int_or(spec, "rounds", 0);
  s.local_steps = int_or(spec, "local_steps", 0);
  s.seed = int_or(spec, "seed", 1);
  s.outer_lr = number_or(spec, "outer_lr", 0.7);
  s.outer_momentum = number_or(spec, "outer_momentum", 0.9);
  s.nesterov = bool_or(spec, "nesterov", true);
  s.check_fraction = number_or(spec, "check_fraction", 0.1);
  s.round_timeout_s = int_or(spec, "round_timeout_s", 600);
  if (!plain_script_name(s.script)) return fail(errc::invalid_argument, "--script must name a file (a plain name in the input)");
  if (s.workers < 1 || s.workers > kMaxTrainShards)
    return fail(errc::invalid_argument, "--workers must be 1.." + std::to_string(kMaxTrainShards));
  if (s.rounds < 1 || s.rounds > kMaxRounds) return fail(errc::invalid_argument, "--rounds must be 1.." + std::to_string(kMaxRounds));
  if (s.local_steps < 1 || s.local_steps > kMaxLocalSteps)
    return fail(errc::invalid_argument, "--local-steps must be 1.." + std::to_string(kMaxLocalSteps));
  if (s.seed < 0 || s.seed + s.rounds > kMaxSeed) return fail(errc::invalid_argument, "--seed out of range");
  if (!(s.outer_lr > 0 && s.outer_lr <= 10)) return fail(errc::invalid_argument, "--outer-lr must be in (0, 10]");
  if (!(s.outer_momentum >= 0 && s.outer_momentum < 1)) return fail(errc::invalid_argument, "--outer-momentum must be in [0, 1)");
  if (!(s.check_fraction >= 0 && s.check_fraction <= 1)) return fail(errc::invalid_argument, "--check-fraction must be in [0, 1]");
  if (s.round_timeout_s < 1 || s.round_timeout_s > 7 * 86400)
    return fail(errc::invalid_argument, "--round-timeout must be 1 s .. 7 days");
  return s;
}

json TrainingSpec::to_json() const {
  return {{"script", script}, {"workers", workers}, {"rounds", rounds}, {"local_steps", local_steps}, {"seed", seed},
          {"outer_lr", outer_lr}, {"outer_momentum", outer_momentum}, {"nesterov", nesterov},
          {"check_fraction", check_fraction}, {"round_timeout_s", round_timeout_s}};
}

Trainer::Trainer(PoolStore& store, std::function<void(const json&)> on_event,
                 std::function<void(const std::string&)> forget_job, TrainerLimits limits)
    : store_(store), on_event_(std::move(on_event)), forget_job_(std::move(forget_job)), limits_(limits) {}

json Trainer::submit(const std::string& peer, std::int64_t now_ms, const json& req) {
  auto spec = TrainingSpec::parse(field_or(req, "spec"));
  if (!spec) return refuse(spec.error());
  auto input = parse_training_input(field_or(req, "input"), spec->script, spec->workers);
  if (!input) return refuse(input.error());
  auto weights_bytes = base64_decode(string_or(req, "weights"));
  if (!weights_bytes) return refusal("bad weights: base64");
  if (weights_bytes->size() > kMaxRoundWeightsBytes)
    return refusal("the weights are over " + std::to_string(kMaxRoundWeightsBytes >> 20) + " MiB, a round's bound");
  auto weights = tr::parse_weights(*weights_bytes, kMaxRoundWeightsBytes);
  if (!weights) return refusal("--init: " + weights.error().what());
  if (weights->tensors.empty()) return refusal("--init holds no tensors");
  const Micro budget = req.contains("budget") && req["budget"].is_number_integer() ? req["budget"].get<Micro>() : 0;
  if (budget < 0) return refusal("a negative budget");
  auto mine = store_.running_trainings_of(peer);
  if (!mine) return refuse(mine.error());
  if (*mine >= limits_.running_per_owner)
    return refusal("you have " + std::to_string(*mine) + " trainings running on this pool, its most for one submitter: "
                   "wait for one to end, or stop one (runsnack pool cancel LINK TRAINING)");
  auto missing = register_training_input(store_, peer, *input, limits_.pool_data_bytes);
  if (!missing) return refuse(missing.error());
  auto id = store_.create_training(peer, spec->to_json(), input->manifest(), *weights_bytes, budget, now_ms,
                                   !missing->empty());
  if (!id) {
    forget_data(peer);  // what it registered: no training names it
    return refuse(id.error());
  }
  on_event_({{"event", "training_submitted"}, {"training", *id}, {"owner", peer}, {"workers", spec->workers},
             {"rounds", spec->rounds}, {"budget", format_credits(budget)}, {"data_bytes", input->bytes},
             {"files_to_upload", missing->size()}});
  any_running_ = true;
  advance(*id, now_ms);  // its first round starts now, when no file is to come
  return {{"ok", true}, {"training", *id}, {"free_only", budget <= 0}, {"missing", *missing}};
}

json Trainer::upload(const std::string& peer, std::int64_t now_ms, const json& req) {
  const std::string id = string_or(req, "training"), digest = string_or(req, "sha256");
  auto t = store_.training(id, false);
  if (!t) return refuse(t.error());
  if (!*t || (*t)->owner != peer) return refusal("no training " + id.substr(0, 40) + " of yours");
  if ((*t)->state != "running" || !(*t)->awaiting_data)
    return refusal("training " + id + " awaits no upload (it is " + (*t)->state + ")");
  // The file must be one the owner's trainings registered (put_training_chunk refuses others): not
  // looked up in this training's manifest, which would cost a pass over up to 10,000 files a chunk.
  const std::int64_t offset = int_or(req, "offset", -1);
  if (offset < 0) return refusal("train_upload without its offset");
  auto data = base64_decode(string_or(req, "data"));
  if (!data) return refusal("train_upload: bad base64");
  auto complete = put_training_chunk(store_, peer, digest, static_cast<std::uint64_t>(offset), *data);
  if (!complete) return refuse(complete.error());
  auto remaining = store_.incomplete_training_blobs(peer);
  if (!remaining) return refuse(remaining.error());
  if (*remaining == 0) advance(id, now_ms);  // its first round starts
  return {{"ok", true}, {"complete", *complete}, {"remaining", *remaining}};
}

bool Trainer::data_ready(const TrainingRow& t, std::int64_t now_ms) {
  if (!t.awaiting_data) return true;
  // Every file a running training names has its row (registered at submit, kept while named), so
  // none of the owner's incomplete is all of this one's in: one count a tick, however many files.
  // Two trainings of one owner uploading at once start together.
  auto incomplete = store_.incomplete_training_blobs(t.owner);
  if (!incomplete) return false;
  if (*incomplete == 0) {
    if (auto r = store_.training_data_ready(t.id); !r) return false;
    on_event_({{"event", "training_data_ready"}, {"training", t.id}});
    return true;
  }
  if (now_ms - t.created_ms > kUploadDeadlineMs)
    end(t, "failed", "its files were not all uploaded within " + std::to_string(kUploadDeadlineMs / 60000) +
                         " minutes: submit it again", now_ms);
  return false;
}

void Trainer::end(const TrainingRow& t, const std::string& state, const std::string& why, std::int64_t now_ms) {
  if (auto r = store_.finish_training(t.id, state, why, now_ms); !r) return;
  on_event_({{"event", "training_" + state}, {"training", t.id}, {"reason", why}, {"rounds", t.round}});
  forget_data(t.owner);
}

void Trainer::forget_data(const std::string& owner) {
  if (auto r = store_.forget_training_data(owner); !r) spdlog::warn("pool: dropping {}'s training data: {}", owner, r.error().what());
}

void Trainer::tick(std::int64_t now_ms) {
  // In turn: those after the last one looked at, then from the first again, so that however many
  // run, none waits more than a few ticks.
  auto running = store_.running_trainings(next_after_, limits_.per_tick);
  if (running && static_cast<std::int64_t>(running->size()) < limits_.per_tick && !next_after_.empty()) {
    auto wrapped = store_.running_trainings("", limits_.per_tick - static_cast<std::int64_t>(running->size()));
    if (wrapped)
      for (auto& id : *wrapped)
        if (id <= next_after_) running->push_back(std::move(id));
  }
  if (!running) {
    spdlog::warn("pool: trainings: {}", running.error().what());
    return;
  }
  any_running_ = !running->empty();
  next_after_ = running->empty() ? std::string() : running->back();
  for (const auto& id : *running) advance(id, now_ms);
}

void Trainer::advance(const std::string& id, std::int64_t now_ms) {
  // Called every tick: while its round runs, a look at the row and the job, not the weights.
  auto glance = store_.training(id, false);
  if (!glance || !*glance) return;
  if ((*glance)->round_job) {
    auto running = store_.job_status(*(*glance)->round_job);
    if (running && running->state == "running") {
      auto spec = TrainingSpec::parse((*glance)->spec);
      const std::int64_t started = int_or(running->info, "started_ms", now_ms);
      if (!spec || now_ms - started < spec->round_timeout_s * 1000) return;
      // Past its deadline: the round closes with what came; what is still out is not waited for, nor paid.
      const std::string why = "round deadline (--round-timeout " + std::to_string(spec->round_timeout_s) +
                              " s) passed with " + std::to_string(running->done) + " of " +
                              std::to_string(running->tasks) + " updates in";
      if (auto r = store_.give_up_job(running->id, why, now_ms); !r) return;
      if (forget_job_) forget_job_(running->id);
      on_event_({{"event", "training_round_deadline"}, {"training", id}, {"job", running->id}, {"reason", why}});
    }
  }
  auto row = store_.training(id, true);
  if (!row || !*row) return;
  const TrainingRow& t = **row;
  auto spec = TrainingSpec::parse(t.spec);
  auto end = [&](const std::string& state, const std::string& why) { this->end(t, state, why, now_ms); };
  if (!spec) return end("failed", spec.error().what());
  if (!data_ready(t, now_ms)) return;
  if (!t.round_job) {
    if (t.round >= spec->rounds) return end("done", "");
    if (auto r = start_round(t, *spec, now_ms); !r) end("failed", "round " + std::to_string(t.round) + ": " + r.error().what());
    return;
  }
  auto job = store_.job_status(*t.round_job);
  if (!job) return end("failed", "round " + std::to_string(t.round) + ": " + job.error().what());
  if (job->state == "running") return;
  if (job->state == "cancelled") return end("cancelled", "its round's job was cancelled");
  if (auto r = close_round(t, *spec, *job, now_ms); !r)
    end("failed", "round " + std::to_string(t.round) + ": " + r.error().what());
}

Result<void> Trainer::start_round(const TrainingRow& t, const TrainingSpec& spec, std::int64_t now_ms) {
  double median = 0;
  if (!t.metrics.empty()) median = number_or(t.metrics.back(), "median_norm", 0.0);
  const json round_spec = {{"script", spec.script},     {"round", t.round},
                           {"shards", spec.workers},    {"local_steps", spec.local_steps},
                           {"seed", spec.seed + t.round}, {"median_norm", median},
                           {"max_weights_bytes", kMaxRoundWeightsBytes}, {"training", t.id},
                           {"spot_check", spec.check_fraction}};
  const json input = {{"training", t.id},
                      {"files", json::array({{{"path", kRoundWeightsIn}, {"data", base64_encode(t.weights)}}})}};
  const json info = {{"training", t.id}, {"round", t.round}, {"started_ms", now_ms}};
  JobRules rules;
  rules.retries = 2;             // a crash on one device: the shard tries two more
  rules.allow_failures = true;   // a shard that fails everywhere: the round closes without it
  rules.needs = kTrainRoundWorkload;
  const Micro budget = std::max<Micro>(0, t.budget - t.spent);
  // A priced worker takes no task of a job whose escrow is dry: say so instead of waiting.
  if (t.budget > 0 && budget <= 0)
    return fail(errc::exhausted, "the budget (" + format_credits(t.budget) + " credits) is spent; the weights after " +
                                     std::to_string(t.round) + " rounds are kept (train_result)");
  auto job = store_.create_job(t.owner, kTrainRoundWorkload, round_spec, input, info, spec.workers, budget, now_ms, rules);
  if (!job) return job.error();
  if (auto r = store_.set_round_job(t.id, *job); !r) return r.error();
  on_event_({{"event", "training_round_started"}, {"training", t.id}, {"round", t.round}, {"job", *job}});
  return {};
}

Result<void> Trainer::close_round(const TrainingRow& t, const TrainingSpec& spec, const JobStatus& job,
                                  std::int64_t now_ms) {
  auto reference = tr::parse_weights(t.weights, kMaxRoundWeightsBytes);
  if (!reference) return reference.error();
  struct Update {
    tr::Weights weights;
    std::uint64_t samples = 0;
    double norm = 0;
    ScriptMetrics metrics;
  };
  std::vector<Update> updates;
  for (std::int64_t shard = 0; shard < spec.workers; ++shard) {
    auto r = store_.result(job.id, shard);
    if (!r) return r.error();
    if (!*r || (*r)->exit_code != 0) continue;
    auto w = parse_update(**r, kMaxRoundWeightsBytes);
    if (!w) continue;  // checked when it came; a result can only be this one
    auto norm = tr::update_norm(*reference, *w);
    if (!norm) continue;
    Update u{std::move(*w), 0, *norm, metrics_of((*r)->stdout_data)};
    u.samples = u.metrics.samples.value_or(static_cast<std::uint64_t>(spec.local_steps));
    updates.push_back(std::move(u));
  }
  if (updates.empty())
    return fail(errc::exhausted, "no update came" + (job.reason.empty() ? std::string() : " (" + job.reason + ")") +
                                     ": see `runsnack pool status` for the shards' errors");
  std::vector<double> norms;
  for (const auto& u : updates) norms.push_back(u.norm);
  double median = tr::median_norm(norms);
  // With fewer than three updates the median is no defence: the last round's stands in.
  const double last = t.metrics.empty() ? 0.0 : number_or(t.metrics.back(), "median_norm", 0.0);
  if (updates.size() < 3 && last > 0) median = last;
  std::vector<tr::Contribution> kept;
  std::int64_t refused = 0;
  double loss_sum = 0, accuracy_sum = 0;
  std::uint64_t loss_samples = 0, accuracy_count = 0;
  for (const auto& u : updates) {
    if (median > 0 && !tr::check_norm(u.norm, median)) {
      ++refused;
      continue;
    }
    kept.push_back({&u.weights, u.samples});
    if (u.metrics.loss) loss_sum += *u.metrics.loss * static_cast<double>(u.samples), loss_samples += u.samples;
    if (u.metrics.accuracy) accuracy_sum += *u.metrics.accuracy, ++accuracy_count;
  }
  if (kept.empty()) return fail(errc::refused, "every update was refused for its size");
  auto average = tr::robust_average(*reference, kept, median);
  if (!average) return average.error();
  tr::Weights momentum;
  if (!t.momentum.empty()) {
    auto m = tr::parse_weights(t.momentum, kMaxRoundWeightsBytes);
    if (!m) return m.error();
    momentum = std::move(*m);
  }
  tr::OuterOptimizer outer({spec.outer_lr, spec.outer_momentum, spec.nesterov}, std::move(momentum));
  auto next = outer.step(*reference, *average);
  if (!next) return next.error();
  next->metadata["round"] = std::to_string(t.round + 1);
  auto next_bytes = tr::encode_weights(*next, kMaxRoundWeightsBytes);
  auto momentum_bytes = tr::encode_weights(outer.momentum(), kMaxRoundWeightsBytes);
  if (!next_bytes || !momentum_bytes) return (next_bytes ? momentum_bytes.error() : next_bytes.error());
  const std::int64_t started = int_or(job.info, "started_ms", now_ms);
  json metrics = {{"round", t.round},
                  {"updates", static_cast<std::int64_t>(kept.size())},
                  {"rejected", job.rejected + refused},
                  {"failed_shards", job.failed},
                  {"closed_by_deadline", job.reason.starts_with("round deadline")},
                  {"median_norm", median},
                  {"seconds", static_cast<double>(std::max<std::int64_t>(0, now_ms - started)) / 1000.0},
                  {"credits_spent", format_credits(job.spent)},
                  {"job", job.id}};
  // Why shards failed (a crash, a NaN, a timeout), as their scripts said it: the submitter sees it a round later.
  if (auto failures = store_.failures(job.id, 3); failures && !failures->empty()) {
    json errors = json::array();
    for (const auto& f : *failures)
      errors.push_back({{"shard", f.shard}, {"exit_code", f.exit_code},
                        {"stderr", valid_utf8(f.stderr_tail.substr(f.stderr_tail.size() > 400 ? f.stderr_tail.size() - 400 : 0))}});
    metrics["errors"] = errors;
  }
  metrics["loss"] = loss_samples > 0 ? json(loss_sum / static_cast<double>(loss_samples)) : json(nullptr);
  metrics["accuracy"] = accuracy_count > 0 ? json(accuracy_sum / static_cast<double>(accuracy_count)) : json(nullptr);
  if (auto r = store_.finish_round(t.id, t.round, *next_bytes, *momentum_bytes, metrics, job.spent); !r) return r.error();
  json event = metrics;
  event["event"] = "training_round";
  event["training"] = t.id;
  on_event_(event);
  return {};
}

json Trainer::status_json(const TrainingRow& t) {
  Micro spent = t.spent;
  json running = nullptr;
  if (t.round_job) {
    if (auto j = store_.job_status(*t.round_job)) {
      spent += j->spent;
      running = {{"job", j->id}, {"round", t.round}, {"done", j->done}, {"running", j->leased},
                 {"pending", j->pending}, {"failed", j->failed}, {"rejected", j->rejected}};
    }
  }
  return {{"training", t.id}, {"owner", t.owner},      {"state", t.state},  {"reason", t.reason},
          {"awaiting_data", t.awaiting_data},
          {"spec", t.spec},   {"rounds_done", t.round}, {"round_running", running},
          {"metrics", t.metrics}, {"budget", format_credits(t.budget)}, {"credits_spent", format_credits(spent)}};
}

json Trainer::status(const std::string& peer, const json& req) {
  if (req.contains("training")) {
    auto t = store_.training(string_or(req, "training"), false);
    if (!t) return refuse(t.error());
    if (!*t || (*t)->owner != peer) return refusal("no training " + string_or(req, "training").substr(0, 40) + " of yours");
    return {{"ok", true}, {"trainings", json::array({status_json(**t)})}};
  }
  auto all = store_.trainings(peer, kMaxTrainingsListed);
  if (!all) return refuse(all.error());
  json list = json::array();
  for (const auto& t : *all) list.push_back(status_json(t));
  return {{"ok", true}, {"trainings", list}};
}

json Trainer::result(const std::string& peer, const json& req) {
  auto t = store_.training(string_or(req, "training"), true);
  if (!t) return refuse(t.error());
  if (!*t || (*t)->owner != peer) return refusal("no training " + string_or(req, "training").substr(0, 40) + " of yours");
  json out = status_json(**t);
  out["ok"] = true;
  out["weights"] = base64_encode((*t)->weights);
  return out;
}

json Trainer::cancel(const std::string& peer, std::int64_t now_ms, const json& req) {
  const std::string id = string_or(req, "training");
  auto t = store_.training(id, false);
  if (!t) return refuse(t.error());
  if (!*t || (*t)->owner != peer) return refusal("no training " + id.substr(0, 40) + " of yours");
  if (auto r = store_.finish_training(id, "cancelled", "cancelled by its owner", now_ms, peer); !r) return refuse(r.error());
  if ((*t)->round_job) (void)store_.cancel_job(*(*t)->round_job, peer, now_ms);
  on_event_({{"event", "training_cancelled"}, {"training", id}});
  forget_data(peer);
  return {{"ok", true}};
}

}  // namespace runsnack::pool
