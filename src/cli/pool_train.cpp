// `pool submit LINK train ...` (pool_train.hpp).
#include "cli/pool_train.hpp"

#include "cli/pool_client.hpp"
#include "core/printable.hpp"
#include "core/json_fields.hpp"
#include "fs/safe_fs.hpp"
#include "pool/ledger_rules.hpp"
#include "pool/training/npy_records.hpp"
#include "pool/training/weights.hpp"
#include "pool/training_data.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/builtin.hpp"
#include "pool/workloads/train_round.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include <unistd.h>

namespace runsnack::cli {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string fs_digest(const std::string& data) { return runsnack::fs::sha256_hex(data.data(), data.size()); }

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// A file of the training's input: the coordinator gets its digest and size, then the bytes it
// lacks in chunks (pool/training_data.hpp).
struct InputFile {
  std::string path, data, sha256;
};

InputFile file_entry(const std::string& path, std::string data) {
  std::string digest = fs_digest(data);
  return {path, std::move(data), std::move(digest)};
}

// --data split into one shard per worker, as input files data/shard-<i>/...: a folder of .npy
// arrays with the same number of records is split by records (each shard gets its rows of every
// array), any other folder by file (in name order, dealt out in turn).
Result<std::vector<InputFile>> data_shards(const fs::path& dir, std::int64_t workers) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail(errc::invalid_argument, "--data: " + dir.string() + " is not a folder");
  std::vector<fs::path> files;
  std::uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().starts_with(".")) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    total += it->file_size();
    files.push_back(it->path());
  }
  if (ec) return fail(errc::io_error, "--data: cannot read " + dir.string() + ": " + ec.message());
  if (files.empty()) return fail(errc::invalid_argument, "--data: " + dir.string() + " holds no files");
  if (total > pool::kMaxTrainDataBytes)
    return fail(errc::too_large, "--data holds " + mib(total) + ", over a training's bound of " +
                                     mib(pool::kMaxTrainDataBytes) + ": train on a subset (e.g. "
                                     "examples/train/prepare_fashion_mnist.py --train-samples 20000)");
  std::sort(files.begin(), files.end());
  std::vector<std::string> contents;
  for (const auto& f : files) {
    auto data = pool::read_file(f, pool::kMaxTrainDataBytes);
    if (!data) return data.error();
    contents.push_back(std::move(*data));
  }
  std::vector<InputFile> out;
  const bool all_top_npy = std::all_of(files.begin(), files.end(), [&](const fs::path& f) {
    return f.parent_path() == dir && f.extension() == ".npy";
  });
  if (all_top_npy) {
    std::vector<pool::training::NpyLayout> layouts;
    for (std::size_t i = 0; i < files.size(); ++i) {
      auto layout = pool::training::parse_npy_layout(contents[i]);
      if (!layout) return fail(errc::invalid_argument, "--data: " + files[i].string() + ": " + layout.error().what());
      layouts.push_back(*layout);
    }
    const std::int64_t records = layouts[0].shape[0];
    for (std::size_t i = 1; i < layouts.size(); ++i)
      if (layouts[i].shape[0] != records)
        return fail(errc::invalid_argument, "--data: " + files[i].filename().string() + " has " +
                                                std::to_string(layouts[i].shape[0]) + " records, " +
                                                files[0].filename().string() + " " + std::to_string(records) +
                                                ": arrays split by records must have as many each");
    if (records < workers)
      return fail(errc::invalid_argument, "--data has " + std::to_string(records) + " records for " +
                                              std::to_string(workers) + " workers");
    for (std::int64_t w = 0; w < workers; ++w)
      for (std::size_t i = 0; i < files.size(); ++i) {
        auto part = pool::training::npy_rows(contents[i], layouts[i], w * records / workers, (w + 1) * records / workers);
        if (!part) return part.error();
        out.push_back(file_entry(pool::shard_folder(w) + "/" + files[i].filename().string(), std::move(*part)));
      }
    return out;
  }
  if (static_cast<std::int64_t>(files.size()) < workers)
    return fail(errc::invalid_argument, "--data has " + std::to_string(files.size()) + " files for " +
                                            std::to_string(workers) +
                                            " workers: give at least one a worker, or .npy arrays to split by records");
  for (std::size_t i = 0; i < files.size(); ++i)
    out.push_back(file_entry(pool::shard_folder(static_cast<std::int64_t>(i) % workers) + "/" +
                                 fs::relative(files[i], dir).string(),
                             std::move(contents[i])));
  return out;
}

// The script, and the other .py files beside it (the modules it imports: runsnack_train.py, a
// model.py), in name order; the data's bound holds for them all.
Result<std::vector<InputFile>> script_files(const fs::path& script) {
  std::vector<InputFile> out;
  auto body = pool::read_file(script, pool::kMaxTrainDataBytes);
  if (!body) return fail(errc::invalid_argument, "--script: cannot read " + script.string() + ": " + body.error().what());
  out.push_back(file_entry(script.filename().string(), std::move(*body)));
  const fs::path folder = script.parent_path().empty() ? fs::path(".") : script.parent_path();
  std::vector<fs::path> beside;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.is_regular_file() && e.path().extension() == ".py" && e.path().filename() != script.filename() &&
        !e.path().filename().string().starts_with("."))
      beside.push_back(e.path());
  std::sort(beside.begin(), beside.end());
  for (const auto& f : beside) {
    auto data = pool::read_file(f, pool::kMaxTrainDataBytes);
    if (!data) return data.error();
    out.push_back(file_entry(f.filename().string(), std::move(*data)));
  }
  return out;
}

// What the coordinator lacks of `files` (its "missing" digests), a chunk at a time, with a
// progress line on stderr; returns the bytes sent.
asio::awaitable<Result<std::uint64_t>> upload_missing(MuxStream& stream, const std::string& training,
                                                      const std::vector<InputFile>& files, const json& missing,
                                                      bool progress) {
  std::map<std::string, const InputFile*> by_digest;
  for (const auto& f : files) by_digest.emplace(f.sha256, &f);
  std::vector<const InputFile*> to_send;
  std::uint64_t total = 0, sent = 0;
  for (const auto& d : missing) {
    auto it = d.is_string() ? by_digest.find(d.get<std::string>()) : by_digest.end();
    if (it == by_digest.end()) co_return fail(errc::malformed, "the coordinator asks for a file this training does not have");
    to_send.push_back(it->second);
    total += it->second->data.size();
  }
  // A terminal gets one line redrawn every 10%; a log, a line every 25%.
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const int step = terminal ? 10 : 25;
  int shown = -1;
  for (const InputFile* f : to_send) {
    std::uint64_t offset = 0;
    do {
      const std::string_view chunk = std::string_view(f->data).substr(offset, pool::kTrainChunkBytes);
      const json request = {{"op", "train_upload"}, {"training", training}, {"sha256", f->sha256},
                            {"offset", offset}, {"data", pool::base64_encode(chunk)}};
      auto r = co_await call_pool(stream, request);
      if (!r) co_return Error(r.error().code, "uploading " + f->path + ": " + r.error().what());
      offset += chunk.size(), sent += chunk.size();
      const int percent = total ? static_cast<int>(sent * 100 / total) : 100;
      if (progress && percent / step != shown / step) {
        shown = percent;
        std::cerr << (terminal ? "\r" : "") << "uploading the script and data: " << mib(sent) << " of " << mib(total)
                  << " (" << percent << "%)" << (terminal ? "" : "\n") << std::flush;
      }
    } while (offset < f->data.size());
  }
  if (progress && shown >= 0 && terminal) std::cerr << std::endl;
  co_return sent;
}

std::string number_text(const json& v, const char* format) {
  if (!v.is_number()) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, v.get<double>());
  return text;
}

// "round 3/30: loss 0.512, accuracy 0.831, 3 updates (0 rejected), 12.3 s, 0.05 credits"
std::string round_line(const json& m, std::int64_t rounds) {
  std::ostringstream line;
  line << "round " << int_or(m, "round", 0) + 1 << "/" << rounds << ": loss " << number_text(m["loss"], "%.4f")
       << ", accuracy " << number_text(m["accuracy"], "%.3f") << ", " << int_or(m, "updates", 0) << " updates ("
       << int_or(m, "rejected", 0) << " rejected, " << int_or(m, "failed_shards", 0) << " shards failed"
       << (bool_or(m, "closed_by_deadline", false) ? ", closed at its deadline" : "") << "), "
       << number_text(m["seconds"], "%.1f") << " s, " << printable(string_or(m, "credits_spent", "0")) << " credits";
  return line.str();
}

Result<void> write_outputs(const fs::path& out, const json& result) {
  auto weights = pool::base64_decode(string_or(result, "weights"));
  if (!weights) return fail(errc::malformed, "the coordinator's weights do not decode");
  if (auto w = pool::write_file(out / "weights.safetensors", *weights); !w) return w.error();
  json summary = result;
  summary.erase("weights");
  summary.erase("ok");
  if (auto w = pool::write_file(out / "training.json", summary.dump(2) + "\n"); !w) return w.error();
  if (auto w = pool::write_file(out / "metrics.json", field_or(result, "metrics", json::array()).dump(2) + "\n"); !w)
    return w.error();
  std::string csv = "round,loss,accuracy,updates,rejected,failed_shards,median_norm,seconds,credits_spent\n";
  for (const auto& m : field_or(result, "metrics", json::array())) {
    auto num = [&](const char* key) { return m.contains(key) && m[key].is_number() ? m[key].dump() : std::string(); };
    csv += num("round") + "," + num("loss") + "," + num("accuracy") + "," + num("updates") + "," + num("rejected") + "," +
           num("failed_shards") + "," + num("median_norm") + "," + num("seconds") + "," +
           string_or(m, "credits_spent", "0") + "\n";
  }
  return pool::write_file(out / "metrics.csv", csv);
}

}  // namespace

asio::awaitable<int> train_body(TrainArgs args, Session& session) {
  if (args.training->empty() && !args.resume.empty()) *args.training = args.resume;
  json request;
  std::vector<InputFile> input_files;
  if (args.training->empty()) {
    if (args.script.empty() || args.init.empty() || args.data.empty() || args.workers < 1)
      co_return report(Error(errc::invalid_argument,
                             "train needs --script FILE --init WEIGHTS --data DIR --workers N (or --resume TRAINING)"));
    auto budget = pool::parse_credits(args.budget);
    if (!budget) co_return report(budget.error());
    auto files = script_files(args.script);
    if (!files) co_return report(files.error());
    auto shards = data_shards(args.data, args.workers);
    if (!shards) co_return report(shards.error());
    for (auto& f : *shards) files->push_back(std::move(f));
    input_files = std::move(*files);
    json manifest = json::array();
    for (const auto& f : input_files) manifest.push_back({{"path", f.path}, {"sha256", f.sha256}, {"size", f.data.size()}});
    auto weights = pool::read_file(args.init, pool::kMaxRoundWeightsBytes + 1);
    if (!weights) co_return report(Error(errc::invalid_argument, "--init: " + weights.error().what()));
    if (weights->size() > pool::kMaxRoundWeightsBytes)
      co_return report(Error(errc::too_large, "--init is over " + mib(pool::kMaxRoundWeightsBytes) + ", a round's bound"));
    if (auto parsed = pool::training::parse_weights(*weights, pool::kMaxRoundWeightsBytes); !parsed)
      co_return report(Error(errc::invalid_argument, "--init " + args.init + ": " + parsed.error().what() +
                                                         " (a safetensors file of float32 tensors: runsnack_train.py "
                                                         "state_dict_to_file)"));
    const json spec = {{"script", fs::path(args.script).filename().string()},
                       {"workers", args.workers},
                       {"rounds", args.rounds},
                       {"local_steps", args.local_steps},
                       {"seed", args.seed},
                       {"outer_lr", args.outer_lr},
                       {"outer_momentum", args.outer_momentum},
                       {"check_fraction", args.check_fraction},
                       {"round_timeout_s", args.round_timeout_s}};
    request = {{"op", "train"}, {"spec", spec}, {"input", {{"files", manifest}}},
               {"weights", pool::base64_encode(*weights)}, {"budget", *budget}};
  }
  auto stream = co_await open_pool_client(session);
  if (!stream) co_return args.training->empty() ? report(stream.error()) : lost_or_refused(stream.error());
  if (args.training->empty()) {
    auto r = co_await call_pool(**stream, request);
    if (!r) co_return report(r.error());
    *args.training = string_or(*r, "training");
    if (args.json) {
      const json submitted = {{"event", "submitted"}, {"training", *args.training},
                              {"free_only", bool_or(*r, "free_only", false)}};
      print_json(submitted);
    } else {
      std::cerr << "training " << *args.training << " submitted: " << args.workers << " workers, " << args.rounds
                << " rounds of " << args.local_steps << " local steps" << std::endl;
      if (bool_or(*r, "free_only", false)) std::cerr << "note: no --budget: only free workers (price 0) take its rounds" << std::endl;
    }
    auto uploaded = co_await upload_missing(**stream, *args.training, input_files, field_or(*r, "missing", json::array()),
                                            !args.json);
    if (!uploaded)
      co_return report(Error(uploaded.error().code, uploaded.error().what() + " (training " + *args.training +
                                                          " waits an hour for its files, then fails; submit it again)"));
    input_files.clear();
    if (args.json) {
      const json sent = {{"event", "uploaded"}, {"training", *args.training}, {"bytes", *uploaded}};
      print_json(sent);
    }
    if (!args.wait) {
      if (!args.json) std::cout << *args.training << std::endl;
      co_return 0;
    }
  }
  const std::string id = *args.training;
  if (!args.json)
    std::cerr << "waiting; Ctrl-C stops waiting, not the training (pool submit LINK train --resume " << id << " --wait)"
              << std::endl;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::size_t shown = 0;
  json status;
  while (true) {
    const json status_request = {{"op", "train_status"}, {"training", id}};
    auto st = co_await call_pool(**stream, status_request);
    if (!st) co_return lost_or_refused(st.error());
    status = (*st)["trainings"][0];
    const json& metrics = status["metrics"];
    const std::int64_t rounds = int_or(status["spec"], "rounds", 0);
    for (; metrics.is_array() && shown < metrics.size(); ++shown) {
      if (args.json) {
        json ev = metrics[shown];
        ev["event"] = "round";
        print_json(ev);
      } else {
        std::cout << round_line(metrics[shown], rounds) << std::endl;
        for (const auto& e : field_or(metrics[shown], "errors", json::array()))
          std::cout << "  shard " << int_or(e, "shard", -1) << " failed (exit " << int_or(e, "exit_code", 0)
                    << "): " << printable_lines(string_or(e, "stderr")) << std::endl;
      }
    }
    if (string_or(status, "state") != "running") break;
    timer.expires_after(std::chrono::milliseconds(500));
    co_await timer.async_wait(asio::use_awaitable);
  }
  const json result_request = {{"op", "train_result"}, {"training", id}};
  auto result = co_await call_pool(**stream, result_request);
  if (!result) co_return lost_or_refused(result.error());
  const fs::path out = args.out.empty() ? fs::path("train-" + id) : fs::path(args.out);
  if (auto w = write_outputs(out, *result); !w) co_return report(w.error());
  const std::string state = string_or(status, "state");
  const json& metrics = status["metrics"];
  const json last = metrics.is_array() && !metrics.empty() ? metrics.back() : json::object();
  if (args.json) {
    const json done = {{"event", "done"}, {"training", id}, {"state", state}, {"reason", status["reason"]},
                       {"rounds_done", status["rounds_done"]}, {"loss", last.value("loss", json())},
                       {"accuracy", last.value("accuracy", json())}, {"credits_spent", status["credits_spent"]},
                       {"out", fs::absolute(out).string()}};
    print_json(done);
  } else {
    std::cout << "training " << id << " " << state << " after " << int_or(status, "rounds_done", 0)
              << " rounds; weights and metrics in " << out.string() << std::endl;
    if (!string_or(status, "reason").empty()) std::cout << "reason: " << printable(string_or(status, "reason")) << std::endl;
  }
  co_return state == "done" ? 0 : kExitFailure;
}

}  // namespace runsnack::cli
