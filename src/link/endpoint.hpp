#pragma once
// A host and port as written in links and on the command line:
//
//   192.0.2.7:7000      IPv4 (dotted quad, no leading zeros)
//   [2001:db8::1]:7000  IPv6 in brackets (no zone id)
//   rdv.example.org:443 DNS name (letters, digits, '-', dots; not all-numeric at the end)
//
// The port is required, 1-65535. Parsed with Boost.URL's authority grammar,
// then narrowed: no user info, no IPvFuture, no percent-escapes left in a name.

#include "core/error.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace runsnack {

// `host` is an IPv4 address, an IPv6 address without brackets (compressed
// form), or a lower-case DNS name.
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;

  // "host:port", IPv6 as "[addr]:port".
  std::string str() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// Errors read "bad <what> 'TEXT' (reason)", TEXT made printable and cut at
// 80 characters, so the message stays one line whatever the input.
Result<Endpoint> parse_endpoint(std::string_view text, std::string_view what = "address");

}  // namespace runsnack
