#pragma once
// The rendezvous protocol: signaling between providers, consumers and a
// rendezvous server, and the opening message of a relay connection
// (docs/ARCHITECTURE.md section 5). Pure: no sockets, no clock.
//
// Every message uses the session framing (session/message.hpp):
//
//   0               1               2               3
//  +---------------+---------------+---------------+---------------+
//  |       body length, u32 big-endian, 2 <= n <= kMaxRdvMessageBytes |
//  +---------------+---------------+---------------+---------------+
//  |       body: one JSON object {"t": TYPE, ...}, n bytes           |
//  +---------------------------------------------------------------+
//
//  provider                     rendezvous                     consumer
//     | register{peer,grants,cands} |                               |
//     |---------------------------->|                               |
//     |<-----challenge{nonce}-------|   32 fresh random bytes        |
//     |------prove{key,sig}-------->|   Ed25519 public key, and its  |
//     |                             |   signature over registration_ |
//     |                             |   proof_message(nonce, peer);  |
//     |                             |   SHA-256(key) must be peer    |
//     |<----registered{observed}----|   (else error{reason}, closed) |
//     |<---------ping{n}------------|                               |
//     |----------pong{n}----------->|   (RTT, keepalive)            |
//     |--register{...} (links changed; same peer only)------------->|
//     |                             |<--connect{peer,grant,cands}---|
//     |                             |------------ping{n}----------->|
//     |                             |<-----------pong{n}------------|
//     |<-intro{token P,peer_observed,...}  intro{token C,...}------->|
//     |    both wait delay_ms, then connect() to each other from the port
//     |    of their signaling connection: TCP simultaneous open
//     |                             |                               |
//   relay connection (fresh TCP):   |                               |
//     |--relay{token P,"provider"}->|<----relay{token C,"consumer"}-|
//     |<--relay_ok------------------|---------relay_ok------------->|
//     |====== raw bytes (the peers' TLS), spliced =================>|
//
// Each introduction mints two relay tokens, one per side, each opening only
// its own side once: the provider's reaches only the authenticated provider,
// the consumer's only that consumer (rendezvous/registry.hpp).
//
// Bounds: a message is at most kMaxRdvMessageBytes; lists and strings are
// capped below; anything else is errc::malformed / errc::too_large. PeerIds,
// grant ids, tokens, keys and signatures are checked for their exact shape.
// Nothing here ever carries a link secret.

#include "core/error.hpp"
#include "link/endpoint.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace runsnack::rdv {

inline constexpr std::uint32_t kMaxRdvMessageBytes = 4096;
inline constexpr std::size_t kMaxGrants = 32;
inline constexpr std::size_t kMaxCandidates = 8;
inline constexpr std::size_t kTokenLength = 26;  // base32 of 128 random bits
inline constexpr std::size_t kNonceLength = 52;  // base32 of 256 random bits
inline constexpr std::size_t kKeyLength = 52;    // base32 of a raw Ed25519 public key (32 bytes)
inline constexpr std::size_t kSigLength = 103;   // base32 of an Ed25519 signature (64 bytes)

struct Register {
  std::string peer;                 // PeerId text
  std::vector<std::string> grants;  // grant ids (public), never secrets
  std::vector<Endpoint> candidates;
  std::optional<Endpoint> mapped;  // a UPnP/NAT-PMP mapped address, when the router gave one
};
struct Challenge {
  std::string nonce;  // base32
};
struct Prove {
  std::string key;  // base32 raw Ed25519 public key
  std::string sig;  // base32 signature over registration_proof_message(nonce, peer)
};
struct Registered {
  Endpoint observed;  // the provider's address as the rendezvous sees it
};
struct Ping {
  std::int64_t n = 0;
};
struct Pong {
  std::int64_t n = 0;
};
struct Connect {
  std::string peer;
  std::string grant;
  std::vector<Endpoint> candidates;
};
struct Intro {
  std::string token;                 // for the relay connection, single use
  Endpoint observed;                 // your own address as seen by the rendezvous
  Endpoint peer_observed;            // the other side's (server-reflexive) address
  std::vector<Endpoint> candidates;  // the other side's own candidates
  std::int64_t delay_ms = 0;         // start the simultaneous open this long after receipt
  std::int64_t rtt_ms = 0;           // your RTT to the rendezvous
  bool relay = false;                // whether this rendezvous relays
  std::optional<Endpoint> mapped;    // the other side's port-mapped address, if any
};
struct Relay {
  std::string token;
  std::string side;  // "provider" | "consumer"
};
struct RelayOk {};
struct ErrorMsg {
  std::string reason;
};

using Message =
    std::variant<Register, Challenge, Prove, Registered, Ping, Pong, Connect, Intro, Relay, RelayOk, ErrorMsg>;

// What a provider signs to register: "runsnack rendezvous register v1", a
// zero byte, the 32-byte nonce, the PeerId text. Bound to this rendezvous
// connection's fresh nonce, so a signature is no use anywhere else.
std::vector<std::uint8_t> registration_proof_message(std::span<const std::uint8_t> nonce, std::string_view peer);

nlohmann::json to_json(const Message& m);
// A decoded JSON object (decode_message_body) -> a typed message.
Result<Message> from_json(const nlohmann::json& j);
// Bytes of one frame body (without the length prefix) -> a typed message.
Result<Message> decode(std::span<const std::uint8_t> body);
// The whole frame: length prefix + JSON.
std::string encode(const Message& m);

}  // namespace runsnack::rdv
