#include "pool/result_message.hpp"

#include "core/json_fields.hpp"
#include "pool/wire.hpp"

#include <optional>

namespace runsnack::pool {

using json = nlohmann::json;

std::optional<std::size_t> frame_of(const json& file, std::size_t frames) {
  if (!file.is_object() || !file.contains("frame") || !file["frame"].is_number_integer()) return std::nullopt;
  const auto i = file["frame"].get<std::int64_t>();
  if (i < 0 || static_cast<std::uint64_t>(i) >= frames) return std::nullopt;
  return static_cast<std::size_t>(i);
}

namespace {
Result<std::size_t> frames_of(const json& result) {
  if (!result.contains("frames")) return std::size_t{0};
  const json& f = result["frames"];
  if (!f.is_number_integer() || f.get<std::int64_t>() < 0 || f.get<std::int64_t>() > kMaxFramesPerResult)
    return fail(errc::malformed, "frames must be 0.." + std::to_string(kMaxFramesPerResult));
  return static_cast<std::size_t>(f.get<std::int64_t>());
}
}  // namespace

Result<std::size_t> announced_frames(const json& req) {
  if (!req.is_object()) return std::size_t{0};
  const std::string op = string_or(req, "op");
  if (op == "result") return frames_of(req);
  if (op != "results" || !req.contains("results") || !req["results"].is_array()) return std::size_t{0};
  std::size_t total = 0;
  for (const auto& one : req["results"]) {
    if (!one.is_object() || !one.contains("op") || one["op"] != "result") continue;
    auto n = frames_of(one);
    if (!n) return n.error();
    total += *n;
  }
  return total;
}

Result<TaskResult> parse_result(const json& req, std::vector<std::string> frames) {
  if (!req.contains("exit_code") || !req["exit_code"].is_number_integer())
    return fail(errc::malformed, "result without exit_code");
  if (!req.contains("stdout") || !req["stdout"].is_string()) return fail(errc::malformed, "result without stdout");
  if (!req.contains("files") || !req["files"].is_array()) return fail(errc::malformed, "result without files");
  if (!req.contains("signature") || !req["signature"].is_string())
    return fail(errc::malformed, "result without signature");
  auto announced = frames_of(req);
  if (!announced) return announced.error();
  if (*announced != frames.size()) return fail(errc::malformed, "the result announced other frames than came");
  TaskResult r;
  r.exit_code = req["exit_code"].get<std::int64_t>();
  auto out = base64_decode(req["stdout"].get_ref<const std::string&>());
  if (!out) return out.error();
  if (out->size() > kMaxStdoutBytes) return fail(errc::too_large, "stdout over the limit");
  r.stdout_data = std::move(*out);
  if (req.contains("stderr")) {  // a failed command's stderr tail
    if (!req["stderr"].is_string()) return fail(errc::malformed, "bad stderr");
    auto err = base64_decode(req["stderr"].get_ref<const std::string&>());
    if (!err) return err.error();
    if (err->size() > kMaxStderrTailBytes) return fail(errc::too_large, "stderr tail over the limit");
    r.stderr_tail = std::move(*err);
  }
  std::size_t total = 0;
  std::vector<bool> named(frames.size(), false);
  for (const auto& f : req["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string()) return fail(errc::malformed, "bad file entry");
    const auto& path = f["path"].get_ref<const std::string&>();
    if (path.empty() || path.size() > 1024 || path.front() == '/' || path.find("..") != std::string::npos)
      return fail(errc::malformed, "bad file path");
    if (f.contains("data") == f.contains("frame")) return fail(errc::malformed, "a file entry has data or a frame, one of them");
    if (f.contains("data")) {
      if (!f["data"].is_string()) return fail(errc::malformed, "bad file entry");
      total += f["data"].get_ref<const std::string&>().size() / 4 * 3;
      continue;
    }
    const auto i = frame_of(f, frames.size());
    if (!i || named[*i]) return fail(errc::malformed, "a file names a frame that is not there, or one already named");
    named[*i] = true;
    total += frames[*i].size();
  }
  for (bool n : named)
    if (!n) return fail(errc::malformed, "a frame no file names");
  if (total > kMaxOutFilesBytes + 16) return fail(errc::too_large, "files over the limit");
  r.files = req["files"];
  r.signature = req["signature"].get<std::string>();
  r.frames = std::move(frames);
  return r;
}

void inline_frames(TaskResult& r) {
  if (r.frames.empty()) return;
  for (auto& f : r.files)
    if (const auto i = frame_of(f, r.frames.size())) {
      f["data"] = base64_encode(r.frames[*i]);
      f.erase("frame");
    }
  r.frames.clear();
}

}  // namespace runsnack::pool
