#pragma once
// The grant proof exchanged right after the TLS handshake, before the
// multiplexer starts (docs/ARCHITECTURE.md section 3):
//
//   consumer -> provider  {"v":1,"grant":"<grant id>","proof":"<base32 HMAC>","goodbye":true}
//   provider -> consumer  {"ok":true,"session":"<id>"}
//                       | {"ok":false,"code":"<errc name>","reason":"<one line>"}
//
// proof = HMAC-SHA256(HKDF(secret), "runsnack auth v1" || TLS exporter value),
// so the secret never crosses the wire and a proof is useless on any other
// TLS connection. "goodbye": the consumer hears why the provider ends its session
// (session/goodbye.hpp); absent from older consumers (and ignored by older providers).
// Both messages use the framing of session/message.hpp.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace runsnack {

inline constexpr int kAuthVersion = 1;

struct AuthHello {
  std::string grant_id;
  std::array<std::uint8_t, 32> proof{};
  bool hears_goodbye = false;  // "goodbye"
};

struct AuthReply {
  bool ok = false;
  errc code = errc::ok;
  std::string reason;      // for the consumer's user, when refused
  std::string session_id;  // when accepted
};

nlohmann::json to_json(const AuthHello& hello);
Result<AuthHello> parse_auth_hello(const nlohmann::json& j);

nlohmann::json to_json(const AuthReply& reply);
Result<AuthReply> parse_auth_reply(const nlohmann::json& j);

// errc <-> the short names used on the wire ("expired", "auth_failed", ...).
const char* errc_name(errc e);
errc errc_from_name(std::string_view name);  // unknown names map to errc::refused

}  // namespace runsnack
