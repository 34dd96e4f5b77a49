#pragma once
// The rendezvous protocol: signaling between providers, consumers and a
// rendezvous server, and the opening message of a relay connection
// (ARCHITECTURE.md section 5). Pure: no sockets, no clock.
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
//     |<----registered{observed}----|                               |
//     |<---------ping{n}------------|                               |
//     |----------pong{n}----------->|   (RTT, keepalive)            |
//     |                             |<--connect{peer,grant,cands}---|
//     |                             |------------ping{n}----------->|
//     |                             |<-----------pong{n}------------|
//     |<-intro{token,peer_observed,cands,delay_ms,...}-------------->|
//     |    both wait delay_ms, then connect() to each other from the port
//     |    of their signaling connection: TCP simultaneous open
//     |                             |                               |
//   relay connection (fresh TCP):   |                               |
//     |--relay{token,side}--------->|<--------relay{token,side}-----|
//     |<--relay_ok------------------|---------relay_ok------------->|
//     |====== raw bytes (the peers' TLS), spliced =================>|
//
// Bounds: a message is at most kMaxRdvMessageBytes; lists and strings are
// capped below; anything else is errc::malformed / errc::too_large. PeerIds,
// grant ids and tokens are checked for their exact shape. Nothing here ever
// carries a link secret.

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

struct Register {
  std::string peer;                 // PeerId text
  std::vector<std::string> grants;  // grant ids (public), never secrets
  std::vector<Endpoint> candidates;
  std::optional<Endpoint> mapped;  // a UPnP/NAT-PMP mapped address, when the router gave one
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

using Message = std::variant<Register, Registered, Ping, Pong, Connect, Intro, Relay, RelayOk, ErrorMsg>;

nlohmann::json to_json(const Message& m);
// A decoded JSON object (decode_message_body) -> a typed message.
Result<Message> from_json(const nlohmann::json& j);
// Bytes of one frame body (without the length prefix) -> a typed message.
Result<Message> decode(std::span<const std::uint8_t> body);
// The whole frame: length prefix + JSON.
std::string encode(const Message& m);

}  // namespace runsnack::rdv
