// WorkerOps: a job's input files for the worker about to run one of its tasks ("input"), and a
// training's large files a chunk at a time ("input_part"); pool/training_data.hpp draws the flow.
#include "pool/worker_ops.hpp"

#include "core/json_fields.hpp"
#include "fs/safe_fs.hpp"
#include "pool/training_data.hpp"
#include "pool/wire.hpp"
#include "pool/workload.hpp"

#include <set>

namespace runsnack::pool {

using json = nlohmann::json;

namespace {

json refuse(const Error& e) { return refusal(e.what()); }

}  // namespace

json WorkerOps::input(WorkerSession& s, const json& req) {
  const std::string job = string_or(req, "job");
  auto input = store_.job_input(job);
  if (!input) return refuse(input.error());
  auto definition = store_.job_definition(job);
  if (!definition) return refuse(definition.error());
  // A workload whose tasks each read their own part (a training's shard) sends only that part.
  const Workload* workload = find_workload(definition->workload);
  const std::int64_t shard = int_or(req, "shard", -1);
  const bool by_shard = workload && workload->input_by_shard() && shard >= 0;
  // Each file with its digest; the worker's kept files (a training's data, round after round: it
  // names them in "have") go by digest only, so a round moves its weights, not the data again.
  std::set<std::string> have;
  for (const auto& h : field_or(req, "have", json::array()))
    if (h.is_string() && h.get_ref<const std::string&>().size() == 64 && have.size() < kMaxKeptInputsNamed)
      have.insert(h.get<std::string>());
  // A worker that reads frames after an answer gets the files raw (a third fewer bytes than base64);
  // one that fetches parts gets what the frames cannot hold as {"fetch": true}, for input_part.
  const bool raw = bool_or(req, "frames", false), parts = bool_or(req, "parts", false);
  const std::string owner = string_or(*input, "owner");
  std::size_t raw_bytes = 0, inline_bytes = 0;
  s.reply_frames.clear();
  json files = json::array();
  for (auto f : field_or(*input, "files", json::array())) {
    if (!f.is_object()) continue;
    if (by_shard && !workload->input_for_shard(definition->spec, shard, string_or(f, "path"))) continue;
    std::optional<std::string> data;
    if (f.contains("data")) {  // a job's own input: in the message
      auto decoded = base64_decode(string_or(f, "data"));
      if (!decoded) continue;
      f["sha256"] = fs::sha256_hex(decoded->data(), decoded->size());
      data = std::move(*decoded);
    }
    const std::string digest = string_or(f, "sha256");
    const auto size = static_cast<std::uint64_t>(std::max<std::int64_t>(0, int_or(f, "size", data ? static_cast<std::int64_t>(data->size()) : 0)));
    f.erase("data");
    if (have.count(digest)) {
      files.push_back(std::move(f));
      continue;
    }
    const bool fits_frames = raw && raw_bytes + size <= kMaxFrameBytes &&
                             s.reply_frames.size() < static_cast<std::size_t>(kMaxFramesPerResult);
    if (!data && (fits_frames || !parts)) {  // a training's file: read from the store
      auto stored = read_training_file(store_, owner, digest);
      if (!stored) return refuse(stored.error());
      data = std::move(*stored);
    }
    if (fits_frames) {
      raw_bytes += data->size();
      f["frame"] = s.reply_frames.size();
      s.reply_frames.push_back(std::move(*data));
    } else if (parts && !data) {
      f["fetch"] = true;
    } else {
      inline_bytes += data->size();
      if (inline_bytes > kMaxInputBytes)
        return refusal("this job's input is larger than one message: update runsnack on this worker");
      f["data"] = base64_encode(*data);
    }
    files.push_back(std::move(f));
  }
  (*input)["files"] = std::move(files);
  input->erase("owner");
  json answer = {{"ok", true}, {"input", *input}};
  if (!s.reply_frames.empty()) answer["frames"] = s.reply_frames.size();
  return answer;
}

json WorkerOps::input_part(WorkerSession& s, const json& req) {
  auto input = store_.job_input(string_or(req, "job"));
  if (!input) return refuse(input.error());
  const std::string digest = string_or(req, "sha256");
  const std::int64_t offset = int_or(req, "offset", -1);
  if (offset < 0) return refusal("input_part without its offset");
  // Only a file of this job's input that the store holds by content.
  for (const auto& f : field_or(*input, "files", json::array())) {
    if (string_or(f, "sha256") != digest || f.contains("data")) continue;
    auto chunk = read_training_chunk(store_, string_or(*input, "owner"), digest, static_cast<std::uint64_t>(offset));
    if (!chunk) return refuse(chunk.error());
    s.reply_frames.clear();
    s.reply_frames.push_back(std::move(*chunk));
    return {{"ok", true}, {"size", int_or(f, "size", 0)}, {"frames", 1}};
  }
  return refusal("job " + string_or(req, "job").substr(0, 40) + " has no stored file " + digest.substr(0, 12));
}

}  // namespace runsnack::pool
