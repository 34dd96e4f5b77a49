#include "link/link.hpp"

#include "core/base32.hpp"
#include "crypto/secret.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cstdio>

namespace runsnack {
namespace {

constexpr std::string_view kScheme = "runsnack://";
constexpr std::string_view kGrantKind = "g";  // path segment naming format version 1
constexpr std::string_view kWhitespace = " \t\r\n\v\f";
constexpr const char* kCutOff = "link: missing secret (#k=...): the link was probably cut off when copied";

Error bad_link(std::string message) { return fail(errc::malformed, "link: " + std::move(message)); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool starts_with_scheme(std::string_view text) {
  return text.size() >= kScheme.size() && lower(text.substr(0, kScheme.size())) == kScheme;
}

// RFC 3986 forbids '[' and ']' in a query, but our IPv6 candidates carry
// them there, as browsers and people write them; escape them for Boost.URL.
std::string escape_query_brackets(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  std::size_t query = text.find('?');
  std::size_t fragment = text.find('#');
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool in_query = query != std::string_view::npos && i > query && i < fragment;
    if (in_query && text[i] == '[') out += "%5B";
    else if (in_query && text[i] == ']') out += "%5D";
    else out += text[i];
  }
  return out;
}

// The first character no URL may hold, for a message that points at it.
std::optional<std::size_t> first_invalid_char(std::string_view text) {
  constexpr std::string_view kAllowed =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~:/?#[]@!$&'()*+,;=%";
  std::size_t pos = text.find_first_not_of(kAllowed);
  if (pos == std::string_view::npos) return std::nullopt;
  return pos;
}

std::string printable(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string(1, c);
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
  return buf;
}

Result<std::string> parse_base32_field(std::string_view value, std::size_t length, const char* what) {
  if (value.size() != length)
    return bad_link(std::string(what) + " must be " + std::to_string(length) + " base32 characters (got " +
                    std::to_string(value.size()) + ")");
  if (!base32::is_alphabet(value))
    return bad_link(std::string(what) + " must be base32 (letters a-z and digits 2-7)");
  return lower(value);
}

// A first path segment other than "g" is a later link format: say so
// rather than report its fields as errors.
Result<void> check_link_kind(const boost::urls::url_view& url) {
  auto segments = url.segments();
  if (segments.empty()) return {};
  std::string kind = *segments.begin();
  if (kind == kGrantKind) return {};
  bool looks_like_kind = !kind.empty() && kind.size() <= 8 && std::all_of(kind.begin(), kind.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  });
  if (looks_like_kind) return bad_link("this link needs a newer runsnack (unknown link type '/" + kind + "/')");
  return bad_link("path must be /g/<grant id>");
}

Result<std::string> parse_grant_id(const boost::urls::url_view& url) {
  auto segments = url.segments();
  if (segments.empty()) return bad_link("missing /g/<grant id> after the address");
  if (segments.size() != 2) return bad_link("path must be /g/<grant id>");
  return parse_base32_field(*std::next(segments.begin()), kGrantIdLength, "grant id");
}

Result<std::vector<Endpoint>> parse_candidates(std::string_view list) {
  std::vector<Endpoint> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = std::min(list.find(',', start), list.size());
    if (out.size() == kMaxLinkCandidates)
      return fail(errc::too_large, "link: too many candidates (at most " + std::to_string(kMaxLinkCandidates) + ")");
    std::string_view item = list.substr(start, comma - start);
    auto ep = parse_endpoint(item, "candidate address");
    if (!ep) return bad_link(ep.error().message);
    out.push_back(std::move(*ep));
    if (comma == list.size()) break;
    start = comma + 1;
  }
  return out;
}

// One key=value pair of a query or fragment, percent-decoded.
struct Param {
  std::string key;
  bool has_value = false;
  std::string value;
};

// Splits an already validated query or fragment on '&' and '='. Boost.URL
// 1.81's params iterators read out of bounds on some inputs ("?#",
// boostorg/url#864, found by link_fuzz), so only its decoding is used here.
std::vector<Param> split_params(boost::urls::pct_string_view encoded) {
  std::vector<Param> out;
  std::string_view rest = encoded;
  if (rest.empty()) return out;
  auto decode = [](std::string_view piece) {
    auto pct = boost::urls::make_pct_string_view(piece);
    return pct ? pct->decode() : std::string(piece);  // cannot fail: the URL parser validated it
  };
  while (true) {
    std::size_t amp = std::min(rest.find('&'), rest.size());
    std::string_view piece = rest.substr(0, amp);
    std::size_t eq = piece.find('=');
    Param p;
    p.key = decode(piece.substr(0, eq));
    if (eq != std::string_view::npos) {
      p.has_value = true;
      p.value = decode(piece.substr(eq + 1));
    }
    out.push_back(std::move(p));
    if (amp == rest.size()) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

struct Query {
  std::optional<std::string> peer;
  std::optional<std::string> candidates;
};

// Known keys once each, with a value; unknown keys are for later versions.
Result<Query> parse_query(const boost::urls::url_view& url) {
  Query q;
  for (Param& param : split_params(url.encoded_query())) {
    for (auto [known, slot] : {std::pair{"peer", &q.peer}, std::pair{"c", &q.candidates}}) {
      if (param.key != known) continue;
      if (*slot) return bad_link(std::string(known) + "= appears twice");
      if (!param.has_value || param.value.empty()) return bad_link(std::string(known) + "= is empty");
      *slot = std::move(param.value);
    }
  }
  return q;
}

Result<std::string> parse_secret(const boost::urls::url_view& url) {
  if (!url.has_fragment()) return fail(errc::malformed, kCutOff);
  std::optional<std::string> secret;
  for (Param& param : split_params(url.encoded_fragment())) {
    if (param.key != "k") continue;
    if (secret) return bad_link("k= appears twice in the fragment");
    secret = std::move(param.value);
  }
  if (!secret || secret->empty()) return fail(errc::malformed, kCutOff);
  auto text = parse_base32_field(*secret, kSecretLength, "secret");
  if (!text) return text.error();
  if (!base32::decode(*text)) return bad_link("secret is not valid base32 (was its last character changed?)");
  return text;
}

}  // namespace

Result<Link> parse_link(std::string_view text) {
  std::size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return bad_link("empty");
  text = text.substr(first, text.find_last_not_of(kWhitespace) - first + 1);
  if (text.size() > kMaxLinkLength)
    return fail(errc::too_large, "link: too long (" + std::to_string(text.size()) + " characters, at most " +
                                     std::to_string(kMaxLinkLength) + ")");
  if (!starts_with_scheme(text)) return bad_link("not a runsnack link (scheme must be runsnack://)");
  if (auto pos = first_invalid_char(text))
    return bad_link("invalid character '" + printable(text[*pos]) + "' at position " + std::to_string(*pos + 1));

  std::string escaped = escape_query_brackets(text);
  auto parsed = boost::urls::parse_uri(escaped);
  if (!parsed) {
    if (text.find('#') == std::string_view::npos) return fail(errc::malformed, kCutOff);
    return bad_link("not a valid URL (" + parsed.error().message() + ")");
  }
  const boost::urls::url_view& url = *parsed;

  Link link;
  if (auto kind = check_link_kind(url); !kind) return kind.error();
  // A link without its fragment was almost surely cut short: say that first.
  if (!url.has_fragment()) return fail(errc::malformed, kCutOff);
  auto grant_id = parse_grant_id(url);
  if (!grant_id) return grant_id.error();
  link.grant_id = std::move(*grant_id);

  if (!url.encoded_authority().empty()) {
    auto rdv = parse_endpoint(url.encoded_authority(), "rendezvous address");
    if (!rdv) return bad_link(rdv.error().message);
    link.rendezvous = std::move(*rdv);
  }

  auto query = parse_query(url);
  if (!query) return query.error();
  if (!query->peer) return bad_link("missing provider id (peer=...)");
  auto peer = PeerId::parse(*query->peer);
  if (!peer) return bad_link(peer.error().message);
  link.provider = std::move(*peer);
  if (query->candidates) {
    auto candidates = parse_candidates(*query->candidates);
    if (!candidates) return candidates.error();
    link.candidates = std::move(*candidates);
  }
  if (!link.rendezvous && link.candidates.empty())
    return bad_link("no way to reach the provider (needs a rendezvous address or c=HOST:PORT)");

  auto secret = parse_secret(url);
  if (!secret) return secret.error();
  link.secret = std::move(*secret);
  return link;
}

std::string format_link(const Link& link) {
  std::string out(kScheme);
  if (link.rendezvous) out += link.rendezvous->str();
  out += "/g/" + link.grant_id + "?peer=" + link.provider.str();
  for (std::size_t i = 0; i < link.candidates.size(); ++i) out += (i == 0 ? "&c=" : ",") + link.candidates[i].str();
  out += "#k=" + link.secret;
  return out;
}

std::string new_grant_id() {
  std::string id = base32::encode(random_bytes(7));  // 56 bits -> 12 characters, keep 10
  id.resize(kGrantIdLength);
  return id;
}

std::string new_secret() { return base32::encode(random_bytes(16)); }  // 128 bits -> 26 characters

}  // namespace runsnack
