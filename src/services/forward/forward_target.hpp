#pragma once
// What a provider exposes to `forward` streams and what a consumer asks for.
// Pure parsing and matching; no I/O (the fuzz target and unit tests feed it text).
//
// Provider side (`runsnack share --expose ...`, stored in grant.terms["forward"]):
//   PORT                        name "PORT", 127.0.0.1:PORT
//   NAME=PORT                   127.0.0.1:PORT
//   NAME=HOST:PORT[,host-header]  (HOST may be [V6])
//   terms: {"targets":[{"name","host","port","host_header"}...], "max_connections": N|null}
//
// Consumer side (`runsnack forward LINK [[BIND:]LOCAL:]TARGET`):
//   TARGET            a port or a NAME; local 127.0.0.1, same port as the target
//   LOCAL:TARGET      local port LOCAL (0: any free port)
//   BIND:LOCAL:TARGET listen on BIND (an address; [V6] bracketed)

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack {

inline constexpr const char* kServiceForward = "forward";
inline constexpr std::size_t kMaxForwardTargets = 64;
inline constexpr std::size_t kMaxTargetNameBytes = 64;

struct ForwardTarget {
  std::string name;                 // [A-Za-z0-9._-]{1,64}
  std::string host = "127.0.0.1";  // loopback unless the provider names another host
  std::uint16_t port = 0;
  bool host_header = false;  // rewrite the Host header of HTTP/1.x requests to host:port

  std::string address() const;  // "host:port", IPv6 bracketed
  bool operator==(const ForwardTarget&) const = default;
};

Result<ForwardTarget> parse_expose(std::string_view text);

struct ForwardSpec {
  std::string bind = "127.0.0.1";
  std::optional<std::uint16_t> local_port;  // none: the target's port
  std::string target;                        // a port in digits or a name
};

Result<ForwardSpec> parse_forward_spec(std::string_view text);

struct ForwardTerms {
  std::vector<ForwardTarget> targets;
  std::optional<std::int64_t> max_connections;  // concurrent forwarded connections per session
};

nlohmann::json to_json(const ForwardTerms& terms);
// Bounded and strict: the terms come from our own store, but the consumer also
// reads the target list from the provider.
Result<ForwardTerms> parse_forward_terms(const nlohmann::json& j);
nlohmann::json to_json(const ForwardTarget& t);
Result<ForwardTarget> parse_forward_target(const nlohmann::json& j);

// The exposed target that `wanted` names: by name first, then by port number.
const ForwardTarget* find_target(const std::vector<ForwardTarget>& targets, std::string_view wanted);

// "10mbit", "500kbit", "1gbit", "2MB", "64KB", "1000" (bytes/s) -> bytes per second.
Result<std::int64_t> parse_bandwidth(std::string_view text);

Result<std::uint16_t> parse_port(std::string_view text, bool allow_zero = false);

}  // namespace runsnack
