#include "pool/browser/browser_protocol.hpp"

#include "core/json_fields.hpp"
#include "crypto/identity.hpp"
#include "pool/wire.hpp"

#include <algorithm>
#include <array>

namespace runsnack::pool::browser {

using json = nlohmann::json;

namespace {

constexpr std::array kWorkerOps = {"register", "calibrated", "claim", "input", "heartbeat", "result", "failed", "abandon", "results"};

// Exactly `out.size()` bytes from lower-case or upper-case hex.
Result<void> hex_field(const json& msg, const char* key, std::span<std::uint8_t> out) {
  const std::string text = string_or(msg, key);
  if (text.size() != out.size() * 2) return fail(errc::malformed, std::string("auth: ") + key + " must be " +
                                                                    std::to_string(out.size() * 2) + " hex digits");
  auto raw = hex_decode(text);
  if (!raw || raw->size() != out.size()) return fail(errc::malformed, std::string("auth: ") + key + " is not hex");
  std::copy(raw->begin(), raw->end(), out.begin());
  return {};
}

bool has_frames(const json& req) {
  if (req.contains("frames")) return true;
  if (req.contains("results") && req["results"].is_array())
    for (const auto& r : req["results"])
      if (r.is_object() && r.contains("frames")) return true;
  return false;
}

}  // namespace

std::string make_nonce() {
  auto bytes = random_bytes(32);
  return hex_encode({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
}

json challenge_message(const std::string& nonce) { return {{"op", "challenge"}, {"nonce", nonce}}; }

std::string auth_bytes(std::string_view nonce, std::string_view grant, std::span<const std::uint8_t, 32> public_key) {
  std::string out = "runsnack browser auth v1\n";
  out.append(nonce).append("\n").append(grant).append("\n");
  out += hex_encode({reinterpret_cast<const char*>(public_key.data()), public_key.size()});
  return out;
}

Result<BrowserAuth> parse_auth(std::string_view text) {
  if (text.size() > kMaxAuthMessageBytes) return fail(errc::too_large, "auth: message over " + std::to_string(kMaxAuthMessageBytes) + " bytes");
  const json msg = json::parse(text, nullptr, false);
  if (!msg.is_object() || string_or(msg, "op") != "auth") return fail(errc::malformed, "auth: expected {\"op\":\"auth\",...}");
  BrowserAuth a;
  a.grant = string_or(msg, "grant");
  if (a.grant.empty() || a.grant.size() > 64) return fail(errc::malformed, "auth: bad grant id");
  if (auto r = hex_field(msg, "public_key", a.public_key); !r) return r.error();
  if (auto r = hex_field(msg, "proof", a.proof); !r) return r.error();
  if (auto r = hex_field(msg, "signature", a.signature); !r) return r.error();
  return a;
}

Result<PeerId> verify_auth(const BrowserAuth& auth, const Key32& grant_key, std::string_view nonce) {
  const std::string bytes = auth_bytes(nonce, auth.grant, auth.public_key);
  const std::span<const std::uint8_t> data{reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
  const Key32 want = hmac_sha256(grant_key, data);
  if (!constant_time_equal(want, auth.proof)) return fail(errc::auth_failed, "the join link's proof does not verify");
  const PeerId peer = PeerId::from_raw_public_key(auth.public_key);
  if (!Identity::verify(peer, auth.public_key, data, auth.signature))
    return fail(errc::auth_failed, "the browser key's signature does not verify");
  return peer;
}

Result<json> parse_request(std::string_view text) {
  if (text.size() > kMaxBrowserMessageBytes)
    return fail(errc::too_large, "message over " + std::to_string(kMaxBrowserMessageBytes) + " bytes");
  json req = json::parse(text, nullptr, false);
  if (!req.is_object()) return fail(errc::malformed, "a message must be a JSON object");
  const std::string op = string_or(req, "op");
  if (std::find(kWorkerOps.begin(), kWorkerOps.end(), op) == kWorkerOps.end())
    return fail(errc::malformed, "unknown op '" + valid_utf8(op.substr(0, 40)) + "'");
  if (has_frames(req)) return fail(errc::malformed, "a browser sends files as base64, not binary frames");
  return req;
}

}  // namespace runsnack::pool::browser
