#include "pool/worker.hpp"

#include "consumer/reconnect.hpp"
#include "core/json_fields.hpp"
#include "fs/safe_fs.hpp"
#include "pool/coordinator.hpp"
#include "pool/workload.hpp"
#include "pool/pool_store.hpp"
#include "pool/wire.hpp"
#include "pool/training/update_check.hpp"
#include "pool/training/weights.hpp"
#include "pool/workloads/builtin.hpp"
#include "pool/workloads/train_round.hpp"
#include "sandbox/launch.hpp"
#include "session/session.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <deque>
#include <cmath>
#include <fstream>
#include <random>
#include <iostream>
#include <limits>
#include <map>
#include <set>

namespace runsnack::pool {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  co_await t.async_wait(asio::use_awaitable);
}

// `request` must live until the call returns (named by the caller: GCC 12).
asio::awaitable<Result<json>> call(MuxStream& stream, const json& request) {
  auto w = co_await write_stream_message(stream, request);
  if (!w) co_return w.error();
  auto r = co_await read_stream_message(stream, kMaxPoolMessageBytes);
  if (!r) co_return r.error();
  if (!r->is_object() || !bool_or(*r, "ok", false))
    co_return fail(errc::refused, r->is_object() ? string_or(*r, "error", "refused") : "bad answer");
  co_return *r;
}

// A request whose answer may announce binary frames after it ("frames": n, wire.hpp): read
// into `frames`, within the same bounds a coordinator keeps for a worker's.
asio::awaitable<Result<json>> call_for_frames(MuxStream& stream, const json& request, std::vector<std::string>& frames) {
  auto answer = co_await call(stream, request);
  if (!answer) co_return answer.error();
  const std::int64_t n = int_or(*answer, "frames", 0);
  if (n < 0 || n > kMaxFramesPerResult) co_return fail(errc::malformed, "an answer announcing " + std::to_string(n) + " frames");
  std::size_t budget = kMaxFrameBytes;
  frames.clear();
  for (std::int64_t i = 0; i < n; ++i) {
    std::array<std::uint8_t, kFrameHeaderBytes> header{};
    auto got = co_await stream.read_exact(asio::buffer(header));
    auto length = got ? frame_length(header, budget) : Result<std::uint32_t>(got.error());
    if (!length) co_return length.error();
    budget -= *length;
    std::string bytes;
    if (auto r = co_await stream.read_growing(*length, bytes); !r) co_return r.error();
    frames.push_back(std::move(bytes));
  }
  co_return answer;
}

// The same, with binary frames after the request (wire.hpp).
asio::awaitable<Result<json>> call(MuxStream& stream, const json& request, const std::vector<const std::string*>& frames) {
  if (frames.empty()) co_return co_await call(stream, request);
  auto w = co_await write_stream_message(stream, request);
  if (!w) co_return w.error();
  for (const std::string* f : frames) {
    const std::string header = frame_header(f->size());
    if (auto h = co_await stream.write(asio::buffer(header)); !h) co_return h.error();
    if (auto b = co_await stream.write(asio::buffer(*f)); !b) co_return b.error();
  }
  auto r = co_await read_stream_message(stream, kMaxPoolMessageBytes);
  if (!r) co_return r.error();
  if (!r->is_object() || !bool_or(*r, "ok", false))
    co_return fail(errc::refused, r->is_object() ? string_or(*r, "error", "refused") : "bad answer");
  co_return *r;
}

// A finished task's message (a result or a failure) and its frames.
struct Unsent {
  json message;
  std::vector<std::string> frames;
  std::size_t frame_bytes() const {
    std::size_t n = 0;
    for (const auto& f : frames) n += kFrameHeaderBytes + f.size();
    return n;
  }
};

// Job input folders kept on disk: a few jobs' tasks may interleave; older ones go.
constexpr std::size_t kInputFoldersKept = 8;
// What a worker keeps of inputs by content (<work_dir>/kept/<sha256>), least recently used dropped first.
constexpr std::uint64_t kKeptInputBytes = 256ull << 20;
constexpr std::size_t kKeptInputFiles = 256;

// Input files by content, across jobs: a training's rounds are jobs of their own that share its data.
class KeptInputs {
 public:
  void open(const fs::path& dir) {
    dir_ = dir;
    std::error_code ec;
    fs::create_directories(dir_, ec);
  }
  json digests() const {
    json out = json::array();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec))
      if (out.size() < kKeptInputFiles && e.path().filename().string().size() == 64) out.push_back(e.path().filename().string());
    return out;
  }
  std::optional<std::string> read(const std::string& digest) const {
    if (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
    std::ifstream in(dir_ / digest, std::ios::binary);
    if (!in) return std::nullopt;
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (runsnack::fs::sha256_hex(data.data(), data.size()) != digest) return std::nullopt;  // damaged: fetched again
    std::error_code ec;
    fs::last_write_time(dir_ / digest, fs::file_time_type::clock::now(), ec);  // used now
    return data;
  }
  void keep(const std::string& digest, const std::string& data) {
    if (data.size() > kKeptInputBytes || dir_.empty()) return;
    std::ofstream(dir_ / digest, std::ios::binary) << data;
    // Over the bound: the least recently used go.
    std::vector<std::pair<fs::file_time_type, fs::path>> all;
    std::uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      total += e.file_size(ec);
      all.emplace_back(e.last_write_time(ec), e.path());
    }
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < all.size() && (total > kKeptInputBytes || all.size() - i > kKeptInputFiles); ++i) {
      if (all[i].second.filename() == digest) continue;
      total -= std::min<std::uint64_t>(total, fs::file_size(all[i].second, ec));
      fs::remove(all[i].second, ec);
    }
  }

 private:
  fs::path dir_;
};

struct Worker {
  WorkerOptions opt;
  const Identity* identity = nullptr;
  double score = 0;
  std::vector<Unsent> unsent;     // finished results not yet acknowledged
  // Jobs whose inputs are on disk, with the shards placed (-1: all of it; a training's
  // round: a shard's files at a time), oldest first.
  std::map<std::string, std::set<std::int64_t>> inputs;
  std::deque<std::string> input_order;
  KeptInputs kept;                // their files by content, for the jobs to come
  std::int64_t accepted = 0;
};

// A file the coordinator holds by content, fetched a chunk at a time (input_part) and checked
// against its digest.
asio::awaitable<Result<std::string>> fetch_input_file(MuxStream& stream, const std::string& job, const json& file) {
  const std::string digest = string_or(file, "sha256");
  const std::int64_t size = int_or(file, "size", -1);
  if (digest.size() != 64 || size < 0 || static_cast<std::uint64_t>(size) > kMaxTrainDataBytes)
    co_return fail(errc::malformed, "an input file to fetch without its digest or size, or past " +
                                        std::to_string(kMaxTrainDataBytes >> 20) + " MiB");
  std::string data;
  data.reserve(static_cast<std::size_t>(size));
  while (data.size() < static_cast<std::size_t>(size)) {
    const json request = {{"op", "input_part"}, {"job", job}, {"sha256", digest}, {"offset", data.size()}};
    std::vector<std::string> frames;
    auto part = co_await call_for_frames(stream, request, frames);
    if (!part) co_return part.error();
    if (frames.size() != 1 || frames[0].empty() || data.size() + frames[0].size() > static_cast<std::size_t>(size))
      co_return fail(errc::malformed, "input_part: not one chunk of the file");
    data += frames[0];
  }
  if (runsnack::fs::sha256_hex(data.data(), data.size()) != digest)
    co_return fail(errc::malformed, "input file " + string_or(file, "path").substr(0, 80) + ": not what its digest says");
  co_return data;
}

// The job's input files into `dir`: each from the message, fetched (`fetched`, by digest), or
// from the kept inputs when the coordinator sent its digest only. False when a kept one is
// missing (ask again for all of it).
bool place_input(Worker& w, const json& input, std::vector<std::string>& frames,
                 std::map<std::string, std::string>& fetched, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const auto& f : field_or(input, "files", json::array())) {
    const std::string rel = string_or(f, "path"), digest = string_or(f, "sha256");
    if (rel.empty() || rel.front() == '/' || rel.find("..") != std::string::npos) continue;
    std::optional<std::string> data;
    if (f.contains("frame")) {
      const std::int64_t i = int_or(f, "frame", -1);
      if (i < 0 || static_cast<std::size_t>(i) >= frames.size()) return false;
      data = std::move(frames[static_cast<std::size_t>(i)]);
    } else if (f.contains("data")) {
      auto decoded = base64_decode(string_or(f, "data"));
      if (!decoded) continue;
      data = std::move(*decoded);
    } else if (auto got = fetched.find(digest); got != fetched.end()) {
      data = got->second;
    } else {
      data = w.kept.read(digest);
      if (!data) return false;
    }
    // Sent whole: kept for the jobs to come, when it is what its digest says.
    const bool sent = f.contains("data") || f.contains("frame") || fetched.count(digest);
    if (sent && !digest.empty() && runsnack::fs::sha256_hex(data->data(), data->size()) == digest) w.kept.keep(digest, *data);
    fs::create_directories((dir / rel).parent_path(), ec);
    std::ofstream(dir / rel, std::ios::binary) << *data;
  }
  return true;
}

// RUNSNACK_POOL_FAULT=flip-bits: a cheater that returns wrong numbers under
// a valid signature (one high mantissa bit flipped in every output file).
void flip_bits(TaskOutput& out) {
  auto flip = [](std::string& data) { data[data.size() / 2 / 4 * 4 + 2] ^= 0x20; };
  for (auto& f : out.files) {
    if (!f.contains("data")) continue;
    auto data = base64_decode(string_or(f, "data"));
    if (!data || data->size() < 4) continue;
    flip(*data);
    f["data"] = base64_encode(*data);
  }
  for (auto& frame : out.frames)
    if (frame.size() >= 4) flip(frame);
}

// RUNSNACK_POOL_FAULT=poison-scale|poison-flip|poison-random|poison-nan: a training worker that
// returns a poisoned update (training/update_check.hpp) under a valid signature: its delta x100,
// its delta negated, random values of the delta's norm, or a NaN, against the round's weights in
// `input_dir`.
void poison_update(TaskOutput& out, const std::string& how, const fs::path& input_dir) {
  auto reference_bytes = read_file(input_dir / kRoundWeightsIn, kMaxRoundWeightsBytes);
  if (!reference_bytes) return;
  auto reference = training::parse_weights(*reference_bytes);
  for (auto& f : out.files) {
    if (!reference || string_or(f, "path") != kRoundWeightsOut) continue;
    const std::int64_t frame = int_or(f, "frame", -1);
    const bool framed = frame >= 0 && static_cast<std::size_t>(frame) < out.frames.size();
    auto data = framed ? Result<std::string>(out.frames[static_cast<std::size_t>(frame)]) : base64_decode(string_or(f, "data"));
    auto update = data ? training::parse_weights(*data) : Result<training::Weights>(data.error());
    if (!update) continue;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const auto measured = training::update_norm(*reference, *update);
    const double norm = measured ? *measured : 1.0;
    double random_norm = 0;
    for (auto& [name, t] : update->tensors) {
      const auto& r = reference->tensors.at(name).values;
      for (std::size_t i = 0; i < t.values.size(); ++i) {
        const float delta = t.values[i] - r[i];
        if (how == "poison-scale") t.values[i] = r[i] + 100 * delta;
        if (how == "poison-flip") t.values[i] = r[i] - delta;
        if (how == "poison-random") t.values[i] = normal(rng), random_norm += double(t.values[i]) * t.values[i];
      }
      if (how == "poison-nan" && !t.values.empty()) t.values.back() = std::numeric_limits<float>::quiet_NaN();
    }
    if (how == "poison-random")  // random directions, the honest delta's size
      for (auto& [name, t] : update->tensors)
        for (std::size_t i = 0; i < t.values.size(); ++i)
          t.values[i] = reference->tensors.at(name).values[i] + t.values[i] * static_cast<float>(norm / std::sqrt(random_norm));
    if (auto encoded = training::encode_weights(*update)) {
      if (framed) out.frames[static_cast<std::size_t>(frame)] = std::move(*encoded);
      else f["data"] = base64_encode(*encoded);
    }
  }
}

Unsent sign_result(const Worker& w, const json& task, TaskOutput out) {
  if (w.opt.fault == "flip-bits") flip_bits(out);
  if (w.opt.fault.starts_with("poison-") && string_or(task, "workload") == kTrainRoundWorkload)
    poison_update(out, w.opt.fault, w.opt.work_dir / "inputs" / string_or(task, "job"));
  if (w.opt.fault == "exit-3") out = TaskOutput{3, "", "fault: exit-3 (a saboteur's failure)\n", json::array(), {}};
  TaskResult r;
  r.exit_code = out.exit_code;
  r.stdout_data = out.stdout_data;
  r.stderr_tail = out.stderr_tail;
  r.files = out.files;
  r.frames = std::move(out.frames);
  std::string id = task["id"];
  std::int64_t attempt = task["attempt"];
  auto bytes = result_signing_bytes(id, attempt, r);
  auto sig = w.identity->sign(bytes);
  std::string sig_hex = sig ? hex_encode({reinterpret_cast<const char*>(sig->data()), sig->size()}) : "";
  if (w.opt.fault == "bad-signature" && !sig_hex.empty()) sig_hex[0] = sig_hex[0] == '0' ? '1' : '0';
  json msg = {{"op", "result"}, {"task", id},          {"attempt", attempt},
              {"exit_code", out.exit_code}, {"stdout", base64_encode(out.stdout_data)},
              {"files", out.files}, {"signature", sig_hex}};
  if (!r.frames.empty()) msg["frames"] = r.frames.size();
  if (!r.stderr_tail.empty()) msg["stderr"] = base64_encode(r.stderr_tail);
  if (w.opt.fault == "malformed") msg.erase("exit_code");
  return {std::move(msg), std::move(r.frames)};
}

// One connected session; returns when it breaks (then the caller reconnects)
// or with a final exit code.
asio::awaitable<std::optional<int>> serve_session(Worker& w, Session& session) {
  StreamHeader header;
  header.service = kServiceWorker;
  auto opened = co_await session.open(header);
  if (!opened) {
    if (opened.error().what().find("does not allow") != std::string::npos) {  // a link for something else: final
      std::cerr << "runsnack: this link does not let a worker join the pool: it is the pool's submit link (for "
                   "`pool submit`, `status`, `jobs`, `credits`). Give `pool join` the join link, the \"join:\" line "
                   "`pool serve` printed."
                << std::endl;
      co_return 1;
    }
    spdlog::warn("pool: {}", opened.error().what());
    co_return std::optional<int>{};
  }
  MuxStream& stream = **opened;
  auto pub = w.identity->public_key_raw();
  json reg = {{"op", "register"},
              {"public_key", hex_encode({reinterpret_cast<const char*>(pub.data()), pub.size()})},
              {"device", {{"kind", w.opt.device_kind}, {"name", w.opt.device_name}, {"score", w.score}, {"price", w.opt.price}}},
              {"holding", json::array()}};
  if (w.opt.max_task_seconds) reg["device"]["max_task_seconds"] = *w.opt.max_task_seconds;
  for (const auto& u : w.unsent) reg["holding"].push_back(u.message["task"]);  // the leases we still answer for
  auto r = co_await call(stream, reg);
  if (r && r->contains("calibrate")) {
    // The coordinator times this and re-walks part of it: the score it pays
    // by is what it measured, ours is only a hint (pool/calibration.hpp).
    const json c = (*r)["calibrate"];
    const CalibrationChallenge challenge{string_or(c, "seed"), int_or(c, "iterations", 0)};
    const json answer = {{"op", "calibrated"}, {"checkpoints", answer_challenge(challenge)}};
    auto measured = co_await call(stream, answer);
    if (!measured) r = measured.error();
    else (*r)["score"] = (*measured)["score"];
  }
  if (!r && r.error().is(errc::refused)) {  // the pool will not have this device (price, calibration): final
    std::cerr << "runsnack: the pool refused this worker: " << r.error().what() << std::endl;
    co_return 1;
  }
  if (!r) {
    spdlog::warn("pool: register: {}", r.error().what());
    co_return std::optional<int>{};
  }
  std::cout << json{{"event", "registered"}, {"device", (*r)["device"]}, {"score", field_or(*r, "score", json(w.score))},
                    {"hint", w.score}}
                   .dump()
            << std::endl;
  if (w.opt.fault == "mistyped") {  // fields of the wrong type: each must be refused, the stream kept
    const json odd[] = {{{"op", json::array({"heartbeat"})}},
                        {{"op", "failed"}, {"task", 7}, {"reason", json::array({1})}},
                        {{"op", "input"}, {"job", json::object()}}};
    for (const json& m : odd) {
      auto answer = co_await call(stream, m);
      if (answer) {
        std::cerr << "runsnack: a mistyped message was accepted: " << m.dump() << std::endl;
        co_return 3;
      }
      std::cout << json{{"event", "mistyped_refused"}, {"why", answer.error().what()}}.dump() << std::endl;
    }
  }
  // Leased tasks not yet run: short tasks are claimed several at a time
  // (and their results returned together), so the pool's own cost per task
  // stays small; long ones one at a time, so no device hoards work.
  std::deque<json> queue;
  std::int64_t prefetch = 1;
  while (true) {
    while (!w.unsent.empty() && (queue.empty() || w.unsent.size() >= 64)) {
      // As many as the frames of one message hold (at least one).
      std::size_t n = 0, frame_bytes = 0;
      for (; n < w.unsent.size() && n < 64; ++n) {
        if (n > 0 && frame_bytes + w.unsent[n].frame_bytes() > kMaxFrameBytes) break;
        frame_bytes += w.unsent[n].frame_bytes();
      }
      json batch = n == 1 ? w.unsent.front().message : json{{"op", "results"}, {"results", json::array()}};
      std::vector<const std::string*> frames;
      for (std::size_t i = 0; i < n; ++i) {
        if (n > 1) batch["results"].push_back(w.unsent[i].message);
        for (const auto& f : w.unsent[i].frames) frames.push_back(&f);
      }
      auto ack = co_await call(stream, batch, frames);
      if (!ack) co_return std::optional<int>{};
      const json answers = n == 1 ? json::array({*ack}) : field_or(*ack, "answers", json::array());
      for (std::size_t i = 0; i < n; ++i) {
        const json& a = i < answers.size() ? answers[i] : json::object();
        bool ok = bool_or(a, "accepted", false);
        const char* event = ok ? "result_accepted" : bool_or(a, "held", false) ? "result_held" : "result_refused";
        std::cout << json{{"event", event}, {"task", w.unsent[i].message["task"]},
                          {"why", string_or(a, "why", string_or(a, "error"))}, {"paid", string_or(a, "paid", "0")}}
                         .dump()
                  << std::endl;
        if (ok) ++w.accepted;
      }
      w.unsent.erase(w.unsent.begin(), w.unsent.begin() + static_cast<std::ptrdiff_t>(n));
    }
    if (w.opt.max_tasks > 0 && w.accepted >= w.opt.max_tasks) co_return 0;
    if (queue.empty()) {
      std::int64_t want = prefetch;
      if (w.opt.max_tasks > 0) want = std::max<std::int64_t>(1, std::min(want, w.opt.max_tasks - w.accepted));
      const json claim_request = {{"op", "claim"}, {"max", want}};
      auto claim = co_await call(stream, claim_request);
      if (!claim && claim.error().what().find("excluded") != std::string::npos) {
        std::cerr << "runsnack: " << claim.error().what() << std::endl;
        co_return 1;
      }
      if (!claim) co_return std::optional<int>{};
      for (const auto& t : field_or(*claim, "tasks", json::array()))
        if (t.is_object()) queue.push_back(t);
      if (queue.empty()) {
        co_await sleep_for(std::chrono::milliseconds(int_or(*claim, "retry_ms", 200)));
        continue;
      }
    }
    const json task = queue.front();
    queue.pop_front();
    const auto task_start = std::chrono::steady_clock::now();
    std::string job = string_or(task, "job");
    if (job.empty() || job.find('/') != std::string::npos || job.find("..") != std::string::npos)
      co_return std::optional<int>{};
    const Workload* workload = find_workload(string_or(task, "workload", "exec"));
    // A workload that reads its shard's files only gets its input a shard at a time.
    const std::int64_t part = workload && workload->input_by_shard() ? int_or(task, "shard", 0) : -1;
    fs::path input_dir = w.opt.work_dir / "inputs" / job;
    if (auto placed = w.inputs.find(job); placed == w.inputs.end() || !placed->second.count(part)) {
      // Files kept from earlier jobs (a training's data, round after round) are named by digest only;
      // should one have gone meanwhile, the input comes again whole.
      bool placed_now = false;
      for (int whole = 0; whole < 2 && !placed_now; ++whole) {
        json input_request = {{"op", "input"}, {"job", job}, {"frames", true}, {"parts", true},
                              {"have", whole ? json::array() : w.kept.digests()}};
        if (part >= 0) input_request["shard"] = part;
        std::vector<std::string> frames;
        auto in = co_await call_for_frames(stream, input_request, frames);
        if (!in) co_return std::optional<int>{};
        // What did not fit the answer's frames comes a chunk at a time.
        std::map<std::string, std::string> fetched;
        for (const auto& f : field_or((*in)["input"], "files", json::array())) {
          if (!bool_or(f, "fetch", false) || fetched.count(string_or(f, "sha256"))) continue;
          auto data = co_await fetch_input_file(stream, job, f);
          if (!data) {
            std::cerr << "runsnack: job " << job << "'s input: " << data.error().what() << std::endl;
            co_return std::optional<int>{};
          }
          fetched.emplace(string_or(f, "sha256"), std::move(*data));
        }
        placed_now = place_input(w, (*in)["input"], frames, fetched, input_dir);
      }
      if (!placed_now) co_return std::optional<int>{};
      if (!w.inputs.count(job)) w.input_order.push_back(job);
      w.inputs[job].insert(part);
      while (w.input_order.size() > kInputFoldersKept) {  // the oldest job's folder: its tasks are long done
        std::error_code ec;
        fs::remove_all(w.opt.work_dir / "inputs" / w.input_order.front(), ec);
        w.inputs.erase(w.input_order.front());
        w.input_order.pop_front();
      }
    }
    TaskWork work;
    work.spec = task["spec"];
    work.index = task["shard"];
    work.count = task["shards"];
    work.input_dir = input_dir;
    work.task_dir = w.opt.work_dir / ("task-" + task["id"].get<std::string>() + "-" + std::to_string(task["attempt"].get<std::int64_t>()));
    work.hidden = w.opt.hidden;
    work.limits = w.opt.limits;
    std::cout << json{{"event", "task_started"}, {"task", task["id"]}}.dump() << std::endl;
    bool stream_ok = true;
    std::string stopped_why;  // the coordinator's, when it no longer wants the task
    // The heartbeat names the task: the answer says when its lease is no longer ours (a round
    // closed at its deadline, a cancelled job), so a hung script stops then, not at its own timeout.
    const json heartbeat = {{"op", "heartbeat"}, {"task", task["id"]}, {"attempt", task["attempt"]}};
    work.tick = [&stream, &stream_ok, &stopped_why, &heartbeat]() -> asio::awaitable<bool> {
      auto hb = co_await call(stream, heartbeat);
      if (!hb) {
        stream_ok = false;
        co_return true;  // the coordinator is out of reach: the work goes on, for the next session to deliver
      }
      if (!bool_or(*hb, "stop", false)) co_return true;
      stopped_why = string_or(*hb, "why", "the coordinator no longer wants this task");
      co_return false;
    };
    const fs::path task_dir = work.task_dir;
    Result<TaskOutput> out = fail(errc::unsupported, "this worker does not know the workload '" +
                                                         string_or(task, "workload").substr(0, 40) + "'");
    if (workload) {
      auto running = workload->run(std::move(work));  // named: GCC 12 and temporaries around co_await
      out = co_await std::move(running);
    }
    std::error_code ec;
    fs::remove_all(task_dir, ec);
    if (!stopped_why.empty()) {  // its lease is gone: neither a result nor a failure is owed
      std::cout << json{{"event", "task_stopped"}, {"task", task["id"]}, {"why", stopped_why}}.dump() << std::endl;
    } else if (!out) {
      w.unsent.push_back(
          Unsent{json{{"op", "failed"}, {"task", task["id"]}, {"attempt", task["attempt"]}, {"reason", out.error().what()}}, {}});
    } else {
      w.unsent.push_back(sign_result(w, task, *out));
    }
    if (!stream_ok) co_return std::optional<int>{};
    const auto took = std::chrono::steady_clock::now() - task_start;
    prefetch = took < std::chrono::milliseconds(20) ? std::min<std::int64_t>(prefetch * 2, 64) : 1;
  }
}

}  // namespace

asio::awaitable<int> run_worker(Consumer* consumer, const Identity* identity, WorkerOptions options) {
  Worker w;
  w.opt = std::move(options);
  w.identity = identity;
  w.kept.open(w.opt.work_dir / "kept");
  w.score = w.opt.score > 0 ? w.opt.score : calibrate_cpu();
  std::cout << json{{"event", "calibrated"}, {"score", w.score}}.dump() << std::endl;
  exec::prepare_spare();  // the first task starts as fast as the next ones
  ReconnectOptions again;  // the first session too: a coordinator not up yet is waited for
  again.connect.served_by = "runsnack pool serve";
  again.on_retry = [](const Error& e) { spdlog::warn("pool: cannot reach the coordinator ({}); retrying", e.what()); };
  while (true) {
    auto session = co_await reconnect(*consumer, w.opt.link, again);
    if (!session) {  // a refusal (revoked, expired, wrong key): final
      std::cerr << "runsnack: " << session.error().what() << std::endl;
      co_return 1;
    }
    auto done = co_await serve_session(w, **session);
    if (done) co_return *done;
    std::cout << json{{"event", "disconnected"}}.dump() << std::endl;
    co_await sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace runsnack::pool
