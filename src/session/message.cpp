#include "session/message.hpp"

namespace runsnack {

namespace {
// Peer JSON needs no deep nesting; a bound keeps memory and destructor recursion small.
constexpr int kMaxDepth = 8;
}  // namespace

std::string encode_message(const nlohmann::json& body) {
  std::string text = body.dump();
  std::string out;
  out.reserve(kMessagePrefixBytes + text.size());
  auto n = static_cast<std::uint32_t>(text.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out += text;
  return out;
}

Result<std::uint32_t> decode_message_length(std::span<const std::uint8_t, kMessagePrefixBytes> p,
                                            std::uint32_t max_bytes) {
  std::uint32_t n = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
  if (n > max_bytes)
    return fail(errc::too_large, "message of " + std::to_string(n) + " bytes exceeds the limit of " +
                                     std::to_string(max_bytes));
  if (n < 2) return fail(errc::malformed, "message too short to be a JSON object");
  return n;
}

Result<nlohmann::json> decode_message_body(std::span<const std::uint8_t> body, std::uint32_t max_bytes) {
  if (body.size() > max_bytes) return fail(errc::too_large, "message body too large");
  // Depth is checked while parsing (the callback sees every nesting step), so
  // a hostile body cannot recurse deep before we look at it.
  int depth = 0;
  bool too_deep = false;
  auto callback = [&](int d, nlohmann::json::parse_event_t, nlohmann::json&) {
    depth = d;
    if (depth > kMaxDepth) too_deep = true;
    return !too_deep;
  };
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), callback, /*allow_exceptions=*/false);
  if (too_deep) return fail(errc::malformed, "message nests too deeply");
  if (j.is_discarded() || !j.is_object()) return fail(errc::malformed, "message is not a JSON object");
  return j;
}

Result<std::string> get_string(const nlohmann::json& obj, const char* key, std::size_t max_len) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return fail(errc::malformed, std::string("missing string field '") + key + "'");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max_len) return fail(errc::too_large, std::string("field '") + key + "' is too long");
  return s;
}

Result<std::int64_t> get_int(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer())
    return fail(errc::malformed, std::string("missing integer field '") + key + "'");
  return it->get<std::int64_t>();
}

Result<bool> get_bool(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_boolean()) return fail(errc::malformed, std::string("missing boolean field '") + key + "'");
  return it->get<bool>();
}

}  // namespace runsnack
