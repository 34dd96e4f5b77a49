#pragma once
// The link: everything a consumer needs to reach a provider and prove it may,
// in one URL a person can paste (docs/ARCHITECTURE.md section 3).
//
//   runsnack://[RDV-HOST:PORT]/g/GRANT-ID?peer=PEER-ID[&c=HOST:PORT,HOST:PORT...]#k=SECRET
//   \______/   \___________/ \_________/ \__________/ \______________________/ \______/
//    scheme     rendezvous    version 1    provider's   direct candidates       secret,
//               (or empty,    "g" + grant  PeerId       (0..16)                 never sent
//               like file:///) id
//
// With a rendezvous and one candidate (128 characters):
//   runsnack://rdv.example.org:7443/g/abcdefghij?peer=eh7ddx5bksrgcytl7bkai36se4nxx3kl&c=192.0.2.7:7000#k=mfrggzdfmztwq2lknnwg23tpoa
// Direct only, IPv4 and IPv6 candidates:
//   runsnack:///g/abcdefghij?peer=eh7ddx5bksrgcytl7bkai36se4nxx3kl&c=192.0.2.7:7000,[2001:db8::1]:7000#k=mfrggzdfmztwq2lknnwg23tpoa
//
// Fields:
//   authority  rendezvous host:port, or empty. No user info.
//   /g/ID      "g" is format version 1 of a grant link; ID is 10 base32 chars.
//              Any other first segment: "this link needs a newer runsnack".
//   peer=      the provider's PeerId, 32 base32 chars. Required.
//   c=         comma-separated HOST:PORT: IPv4, [IPv6] or a DNS name; port
//              1-65535; at most 16. A link needs a rendezvous or a candidate.
//   #k=        the secret, 26 base32 chars (128 bits, canonical). In the
//              fragment so that it is never sent to a server or logged by one.
//
// Parsing is strict: leading/trailing whitespace is trimmed (copy-paste),
// nothing else is forgiven; every error is one line starting "link: " that
// names what is wrong. Forward compatibility: unknown query and fragment keys
// are ignored (later versions add e.g. relay hints); a known key given twice
// is an error. Base32 fields are case-insensitive and kept in lower case;
// percent-escapes are decoded as in any URL. format_link() writes IPv6
// brackets in the query unescaped, as shown above (RFC 3986 would escape
// them; browsers and people do not), and parse_link() accepts both spellings.
//
// Pure functions, thread-safe. new_grant_id()/new_secret() use the CSPRNG.

#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "link/endpoint.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack {

inline constexpr std::size_t kMaxLinkLength = 2048;
inline constexpr std::size_t kMaxLinkCandidates = 16;
inline constexpr std::size_t kGrantIdLength = 10;   // base32 chars: 50 bits, public
inline constexpr std::size_t kSecretLength = 26;    // base32 chars: 128 bits

struct Link {
  std::optional<Endpoint> rendezvous;
  std::vector<Endpoint> candidates;
  PeerId provider;
  std::string grant_id;  // kGrantIdLength base32 chars
  std::string secret;    // kSecretLength base32 chars
  friend bool operator==(const Link&, const Link&) = default;
};

Result<Link> parse_link(std::string_view text);

// The canonical text of `link`. Precondition: `link` is valid (as parse_link
// returns, or built from new_grant_id()/new_secret() and parsed endpoints);
// then parse_link(format_link(link)) == link.
std::string format_link(const Link& link);

std::string new_grant_id();
std::string new_secret();

}  // namespace runsnack
