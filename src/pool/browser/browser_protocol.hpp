#pragma once
// What a browser worker (the /join page, docs/BROWSER-WORKERS.md) says on its
// WebSocket, with no I/O: the server's challenge, the page's proof of the
// join link and of its key, and the worker messages that follow.
//
//   server -> page   {"op":"challenge","nonce":"<64 hex>"}
//   page -> server   {"op":"auth","grant":"<id>","public_key":"<64 hex>",
//                     "proof":"<64 hex>","signature":"<128 hex>"}
//   server -> page   {"ok":true,"peer":"<PeerId>"} | {"ok":false,"error":"..."} (then closes)
//   then the "pool-worker" requests of wire.hpp, one answer each, as JSON text;
//   results carry their files as base64 (no binary frames).
//
// proof = HMAC-SHA256(grant key, auth_bytes) where the grant key is the
// native one (crypto/secret.hpp derive_grant_key of the link secret), and
// signature = Ed25519(browser key, auth_bytes), auth_bytes =
// "runsnack browser auth v1\n" nonce "\n" grant "\n" public_key (hex). The
// secret never crosses the wire; the nonce is fresh per connection, so a
// proof is useless on another one. Unlike the native handshake the proof is
// not bound to a TLS channel: behind plain HTTP, a man in the middle could
// relay it (docs: serve the page over TLS off loopback).

#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "crypto/secret.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace runsnack::pool::browser {

// A result's tile travels as base64 inside the JSON (a 512x512 float32 tile is 1.4 MiB as text).
inline constexpr std::size_t kMaxBrowserMessageBytes = 6 * 1024 * 1024;
inline constexpr std::size_t kMaxAuthMessageBytes = 1024;

struct BrowserAuth {
  std::string grant;
  std::array<std::uint8_t, 32> public_key{};
  Key32 proof{};
  std::array<std::uint8_t, 64> signature{};
};

// A fresh random nonce (hex) for one connection.
std::string make_nonce();
nlohmann::json challenge_message(const std::string& nonce);

// The bytes the proof and the signature cover.
std::string auth_bytes(std::string_view nonce, std::string_view grant, std::span<const std::uint8_t, 32> public_key);

// The page's "auth" message, strictly: every field present, of its type and length.
Result<BrowserAuth> parse_auth(std::string_view text);
// The browser's PeerId when both the proof (against `grant_key`) and the
// signature hold; auth_failed otherwise.
Result<PeerId> verify_auth(const BrowserAuth& auth, const Key32& grant_key, std::string_view nonce);

// One worker request after "auth": a JSON object under the size bound whose
// "op" is a worker op, with no binary frames announced (a browser has none).
Result<nlohmann::json> parse_request(std::string_view text);

}  // namespace runsnack::pool::browser
