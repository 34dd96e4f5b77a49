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
// What chat clients put where they wrap a line, besides whitespace: no-break
// space, soft hyphen, zero-width space/non-joiner/joiner, word joiner, BOM.
constexpr std::string_view kInvisible[] = {"\xc2\xa0", "\xc2\xad", "\xe2\x80\x8b", "\xe2\x80\x8c",
                                           "\xe2\x80\x8d", "\xe2\x81\xa0", "\xef\xbb\xbf"};
// The path spelling's characters: none is special to bash, zsh or fish ('[' ']'
// only for a bracketed IPv6 address typed by hand; format_link never writes them).
constexpr std::string_view kPathChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:/,[]";
constexpr const char* kCutOff = "link: missing secret (/k/...): the link was probably cut off when copied";
constexpr const char* kQueryCutOff =
    "link: missing secret (#k=...): the link was cut off when copied, or by a shell at '&' or '#' (put a link "
    "with '&' in single quotes)";

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

// `text` without whitespace or the invisible characters of kInvisible, wherever they are.
std::string without_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (kWhitespace.find(text[i]) != std::string_view::npos) {
      ++i;
      continue;
    }
    std::size_t skip = 0;
    for (std::string_view mark : kInvisible)
      if (text.substr(i, mark.size()) == mark) skip = mark.size();
    if (skip == 0) out += text[i++];
    i += skip;
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

// A piece of the link for a message: at most 16 characters (never a whole secret).
std::string printable_text(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 16)) out += printable(c);
  return text.size() > 16 ? out + "..." : out;
}

Result<std::string> parse_base32_field(std::string_view value, std::size_t length, const char* what) {
  if (value.size() != length)
    return bad_link(std::string(what) + " must be " + std::to_string(length) + " base32 characters (got " +
                    std::to_string(value.size()) + ")");
  if (!base32::is_alphabet(value))
    return bad_link(std::string(what) + " must be base32 (letters a-z and digits 2-7)");
  return lower(value);
}

// "this link needs a newer runsnack" for what looks like a later link type.
Error unknown_kind(const std::string& kind, const char* path_shape) {
  bool looks_like_kind = !kind.empty() && kind.size() <= 8 && std::all_of(kind.begin(), kind.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  });
  if (looks_like_kind) return bad_link("this link needs a newer runsnack (unknown link type '/" + kind + "/')");
  return bad_link(std::string("path must be ") + path_shape);
}

// A first path segment other than "g" is a later link format: say so
// rather than report its fields as errors.
Result<void> check_link_kind(const boost::urls::url_view& url) {
  auto segments = url.segments();
  if (segments.empty()) return {};
  std::string kind = *segments.begin();
  if (kind == kGrantKind) return {};
  return unknown_kind(kind, "/g/<grant id>");
}

Result<std::string> parse_grant_id(const boost::urls::url_view& url) {
  auto segments = url.segments();
  if (segments.empty()) return bad_link("missing /g/<grant id> after the address");
  if (segments.size() != 2) return bad_link("path must be /g/<grant id>");
  return parse_base32_field(*std::next(segments.begin()), kGrantIdLength, "grant id");
}

// HOST:PORT with an IPv6 host bare ("2001:db8::1:7000": the port follows the
// last ':') or in brackets; IPv4 and names as parse_endpoint() reads them.
Result<Endpoint> parse_bare_endpoint(std::string_view text, std::string_view what) {
  std::size_t colon = text.rfind(':');
  if (text.empty() || text.front() == '[' || colon == std::string_view::npos ||
      text.substr(0, colon).find(':') == std::string_view::npos)
    return parse_endpoint(text, what);
  return parse_endpoint("[" + std::string(text.substr(0, colon)) + "]" + std::string(text.substr(colon)), what);
}

// The path spelling of an endpoint: an IPv6 host without brackets.
std::string bare_str(const Endpoint& ep) { return ep.host + ":" + std::to_string(ep.port); }

using EndpointParser = Result<Endpoint> (*)(std::string_view, std::string_view);

Result<std::vector<Endpoint>> parse_candidates(std::string_view list, EndpointParser parse) {
  std::vector<Endpoint> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = std::min(list.find(',', start), list.size());
    if (out.size() == kMaxLinkCandidates)
      return fail(errc::too_large, "link: too many candidates (at most " + std::to_string(kMaxLinkCandidates) + ")");
    std::string_view item = list.substr(start, comma - start);
    auto ep = parse(item, "candidate address");
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

Result<std::string> check_secret(std::string_view secret) {
  auto text = parse_base32_field(secret, kSecretLength, "secret");
  if (!text) return text.error();
  if (!base32::decode(*text)) return bad_link("secret is not valid base32 (was its last character changed?)");
  return text;
}

Result<std::string> parse_secret(const boost::urls::url_view& url) {
  if (!url.has_fragment()) return fail(errc::malformed, kQueryCutOff);
  std::optional<std::string> secret;
  for (Param& param : split_params(url.encoded_fragment())) {
    if (param.key != "k") continue;
    if (secret) return bad_link("k= appears twice in the fragment");
    secret = std::move(param.value);
  }
  if (!secret || secret->empty()) return fail(errc::malformed, kQueryCutOff);
  return check_secret(*secret);
}

// The path spelling (the header's drawing): KEY/VALUE segments after the address.
Result<Link> parse_path_link(std::string_view text) {
  if (std::size_t pos = text.find_first_not_of(kPathChars); pos != std::string_view::npos)
    return bad_link("invalid character '" + printable(text[pos]) + "' at position " + std::to_string(pos + 1));
  std::string_view rest = text.substr(kScheme.size());
  const std::size_t slash = std::min(rest.find('/'), rest.size());
  const std::string_view authority = rest.substr(0, slash);
  std::string_view path = rest.substr(std::min(slash + 1, rest.size()));
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) return fail(errc::malformed, kCutOff);  // "runsnack://" and its address, no more

  std::vector<std::string_view> segments;
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t end = std::min(path.find('/', start), path.size());
    segments.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  if (lower(segments.front()) != kGrantKind)
    return unknown_kind(lower(segments.front()), "/g/<grant id>/p/<provider id>/...");

  struct Field {
    const char* key;
    std::optional<std::string_view> value;
  };
  Field grant{"g", {}}, peer{"p", {}}, candidates{"c", {}}, secret{"k", {}};
  for (std::size_t i = 0; i + 1 < segments.size(); i += 2) {
    if (segments[i].empty()) return bad_link("empty path segment ('//')");
    const std::string key = lower(segments[i]);
    for (Field* field : {&grant, &peer, &candidates, &secret}) {
      if (key != field->key) continue;  // an unknown key is for a later version
      if (field->value) return bad_link(key + "/ appears twice");
      field->value = segments[i + 1];
    }
  }
  // A link without its secret was almost surely cut short: say that first.
  if (!secret.value || secret.value->empty()) return fail(errc::malformed, kCutOff);
  if (segments.size() % 2 != 0)
    return bad_link("path must be KEY/VALUE pairs ('" + printable_text(segments.back()) + "' has no value)");

  Link link;
  if (!grant.value) return bad_link("missing /g/<grant id> after the address");
  auto grant_id = parse_base32_field(*grant.value, kGrantIdLength, "grant id");
  if (!grant_id) return grant_id.error();
  link.grant_id = std::move(*grant_id);
  if (!authority.empty()) {
    auto rdv = parse_bare_endpoint(authority, "rendezvous address");
    if (!rdv) return bad_link(rdv.error().message);
    link.rendezvous = std::move(*rdv);
  }
  if (!peer.value || peer.value->empty()) return bad_link("missing provider id (/p/...)");
  auto provider = PeerId::parse(*peer.value);
  if (!provider) return bad_link(provider.error().message);
  link.provider = std::move(*provider);
  if (candidates.value) {
    if (candidates.value->empty()) return bad_link("c/ is empty");
    auto list = parse_candidates(*candidates.value, parse_bare_endpoint);
    if (!list) return list.error();
    link.candidates = std::move(*list);
  }
  if (!link.rendezvous && link.candidates.empty())
    return bad_link("no way to reach the provider (needs a rendezvous address or /c/HOST:PORT)");
  auto checked = check_secret(*secret.value);
  if (!checked) return checked.error();
  link.secret = std::move(*checked);
  return link;
}

// The first spelling: /g/ID?peer=...&c=...#k=..., read with Boost.URL.
Result<Link> parse_query_link(std::string_view text) {
  if (auto pos = first_invalid_char(text))
    return bad_link("invalid character '" + printable(text[*pos]) + "' at position " + std::to_string(*pos + 1));

  std::string escaped = escape_query_brackets(text);
  auto parsed = boost::urls::parse_uri(escaped);
  if (!parsed) {
    if (text.find('#') == std::string_view::npos) return fail(errc::malformed, kQueryCutOff);
    return bad_link("not a valid URL (" + parsed.error().message() + ")");
  }
  const boost::urls::url_view& url = *parsed;

  Link link;
  if (auto kind = check_link_kind(url); !kind) return kind.error();
  // A link without its fragment was almost surely cut short: say that first.
  if (!url.has_fragment()) return fail(errc::malformed, kQueryCutOff);
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
    auto candidates = parse_candidates(*query->candidates, parse_endpoint);
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

}  // namespace

Result<Link> parse_link(std::string_view raw) {
  // Bounds the work before anything is copied; whitespace may pad a link, not bury it.
  if (raw.size() > 4 * kMaxLinkLength)
    return fail(errc::too_large, "link: too long (" + std::to_string(raw.size()) + " characters, at most " +
                                     std::to_string(kMaxLinkLength) + ")");
  const std::string text = without_whitespace(raw);
  if (text.empty()) return bad_link("empty");
  if (text.size() > kMaxLinkLength)
    return fail(errc::too_large, "link: too long (" + std::to_string(text.size()) + " characters, at most " +
                                     std::to_string(kMaxLinkLength) + ")");
  if (!starts_with_scheme(text)) return bad_link("not a runsnack link (scheme must be runsnack://)");
  if (text.find_first_of("?#") != std::string::npos) return parse_query_link(text);
  return parse_path_link(text);
}

bool link_is_unfinished(std::string_view raw) {
  if (raw.size() > kMaxLinkLength) return false;
  const std::string text = without_whitespace(raw);
  if (text.empty()) return false;
  if (text.size() < kScheme.size()) return lower(text) == kScheme.substr(0, text.size());
  if (!starts_with_scheme(text) || parse_link(text)) return false;
  const bool query = text.find_first_of("?#") != std::string::npos;
  const std::string folded = lower(text);
  const std::size_t key = query ? folded.find("#k=") : folded.rfind("/k/");
  if (key == std::string::npos) return true;
  const std::size_t start = key + 3;
  const std::size_t end = std::min(folded.find_first_of(query ? "&" : "/", start), folded.size());
  return end - start < kSecretLength;
}

std::string format_link(const Link& link) {
  std::string out(kScheme);
  if (link.rendezvous) out += bare_str(*link.rendezvous);
  out += "/g/" + link.grant_id + "/p/" + link.provider.str();
  for (std::size_t i = 0; i < link.candidates.size(); ++i) out += (i == 0 ? "/c/" : ",") + bare_str(link.candidates[i]);
  out += "/k/" + link.secret;
  return out;
}

std::string new_grant_id() {
  std::string id = base32::encode(random_bytes(7));  // 56 bits -> 12 characters, keep 10
  id.resize(kGrantIdLength);
  return id;
}

std::string new_secret() { return base32::encode(random_bytes(16)); }  // 128 bits -> 26 characters

}  // namespace runsnack
