// libFuzzer: a worker's result message and the binary frames after it come
// from any peer that joined the pool, and the coordinator parses them.
// Input: the message's JSON text, a NUL, then the frames as on the wire.
#include "core/json_fields.hpp"
#include "pool/result_message.hpp"
#include "pool/wire.hpp"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  using namespace runsnack::pool;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto nul = in.find('\0');
  const auto req = nlohmann::json::parse(in.substr(0, nul), nullptr, false);
  auto count = announced_frames(req);
  if (!count || *count > 64) return 0;
  auto frames = split_frames(nul == std::string_view::npos ? std::string_view{} : in.substr(nul + 1), *count);
  if (!frames) return 0;
  std::size_t bytes = 0;
  for (const auto& f : *frames) bytes += f.size();
  if (bytes > kMaxFrameBytes) __builtin_trap();
  if (runsnack::string_or(req, "op") != "result") return 0;
  auto r = parse_result(req, std::move(*frames));
  if (!r) return 0;
  inline_frames(*r);
  if (!r->frames.empty()) __builtin_trap();
  for (const auto& f : r->files)
    if (!f.contains("data") || f.contains("frame")) __builtin_trap();
  return 0;
}
