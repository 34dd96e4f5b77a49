#pragma once
// The link: everything a consumer needs to reach a provider and prove it may,
// in one URL a person can paste (docs/ARCHITECTURE.md section 3).
//
//   runsnack://[RDV-HOST:PORT]/g/GRANT-ID/p/PEER-ID[/c/HOST:PORT,HOST:PORT...]/k/SECRET
//   \______/   \___________/ \_________/ \_______/ \____________________/ \______/
//    scheme     rendezvous    version 1    provider's direct candidates     secret,
//               (or empty,    "g" + grant  PeerId     (0..16)               never sent
//               like file:///) id
//
// With a rendezvous and one candidate (125 characters):
//   runsnack://rdv.example.org:7443/g/abcdefghij/p/eh7ddx5bksrgcytl7bkai36se4nxx3kl/c/192.0.2.7:7000/k/mfrggzdfmztwq2lknnwg23tpoa
// Direct only, IPv4 and IPv6 candidates (an IPv6 address without brackets:
// the port is after its last ':'):
//   runsnack:///g/abcdefghij/p/eh7ddx5bksrgcytl7bkai36se4nxx3kl/c/192.0.2.7:7000,2001:db8::1:7000/k/mfrggzdfmztwq2lknnwg23tpoa
//
// Shell-safe (issue 39): a link holds only letters, digits and "-._:/,", none
// of which bash, zsh or fish treat specially, so it survives being pasted
// without quotes (no '&' to background the command, no '?' or '[' to glob, no
// '#' to start a comment, no '~' or '=' to expand).
//
// Fields, after the address, as KEY/VALUE path segments:
//   authority  rendezvous host:port, or empty. No user info.
//   g/ID       first: "g" is format version 1 of a grant link; ID is 10 base32
//              chars. Any other first segment: "this link needs a newer runsnack".
//   p/PEER     the provider's PeerId, 32 base32 chars. Required.
//   c/LIST     comma-separated HOST:PORT: IPv4, IPv6 (bare, or in brackets) or
//              a DNS name; port 1-65535; at most 16. A link needs a rendezvous
//              or a candidate.
//   k/SECRET   the secret, 26 base32 chars (128 bits, canonical); written last,
//              so that a link cut short is missing it. No server ever sees a
//              link: it is parsed here and only the grant id and a proof leave.
//
// The first spelling (runsnack 0.1), still read, never written:
//   runsnack://[RDV-HOST:PORT]/g/GRANT-ID?peer=PEER-ID[&c=HOST:PORT,[IPV6]:PORT...]#k=SECRET
// ('?' or '#' in a link selects it; RFC 3986 escapes are decoded there, and
// IPv6 candidates are in brackets, escaped or not).
//
// Parsing is strict but for whitespace: every whitespace character anywhere is
// removed first (a chat client that wrapped the link over lines, an indent),
// with the invisible characters such clients insert at a wrap (no-break and
// zero-width spaces, soft hyphens). Every error is one line starting "link: "
// that names what is wrong. Forward compatibility: unknown keys are ignored
// (later versions add e.g. relay hints); a known key given twice is an error.
// Keys, the scheme and base32 fields are case-insensitive; base32 is kept in
// lower case.
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

// Whether `text` is the beginning of a link that does not parse yet because
// its secret is missing or short: the first line of a link wrapped over two,
// for a reader of stdin that may read the next line (cli/link_arg.hpp).
bool link_is_unfinished(std::string_view text);

// The canonical text of `link`, in the shell-safe spelling. Precondition: `link` is valid (as parse_link
// returns, or built from new_grant_id()/new_secret() and parsed endpoints);
// then parse_link(format_link(link)) == link.
std::string format_link(const Link& link);

std::string new_grant_id();
std::string new_secret();

}  // namespace runsnack
