#include "link/endpoint.hpp"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <optional>

namespace runsnack {
namespace {

constexpr std::size_t kMaxHostName = 253;  // RFC 1035
constexpr std::size_t kMaxLabel = 63;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ldh(char c) { return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-'; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Letters, digits and hyphens in dot-separated labels (RFC 1123). The last
// label must not be all digits, so "1.2.3.256" is a bad IPv4 address, not a name.
std::optional<std::string> host_name_problem(const std::string& name) {
  if (name.empty()) return "missing host";
  if (name.size() > kMaxHostName) return "host name longer than 253 characters";
  std::size_t start = 0;
  bool last_all_digits = false;
  while (start <= name.size()) {
    std::size_t dot = std::min(name.find('.', start), name.size());
    std::string_view label(name.data() + start, dot - start);
    if (label.empty()) return "empty label in host name";
    if (label.size() > kMaxLabel) return "host name label longer than 63 characters";
    if (!std::all_of(label.begin(), label.end(), is_ldh)) return "host name may hold only letters, digits, '-' and '.'";
    if (label.front() == '-' || label.back() == '-') return "host name label starts or ends with '-'";
    last_all_digits = std::all_of(label.begin(), label.end(), is_digit);
    start = dot + 1;
  }
  if (last_all_digits) return "not a valid IPv4 address or host name";
  return std::nullopt;
}

std::optional<std::uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), is_digit)) return std::nullopt;
  unsigned value = 0;
  for (char c : s) value = value * 10 + static_cast<unsigned>(c - '0');
  if (value < 1 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

constexpr std::size_t kMaxEcho = 80;

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxEcho)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > kMaxEcho) out += "...";
  return out;
}

Error bad(std::string_view what, std::string_view text, std::string_view reason) {
  return fail(errc::malformed,
              "bad " + std::string(what) + " '" + printable(text) + "' (" + std::string(reason) + ")");
}

}  // namespace

std::string Endpoint::str() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<Endpoint> parse_endpoint(std::string_view text, std::string_view what) {
  auto parsed = boost::urls::parse_authority(text);
  if (!parsed) return bad(what, text, "expected HOST:PORT");
  const auto& auth = *parsed;
  if (auth.has_userinfo()) return bad(what, text, "user info is not allowed");
  if (!auth.has_port()) return bad(what, text, "missing port");
  auto port = parse_port(auth.port());
  if (!port) return bad(what, text, "port must be 1-65535");

  Endpoint ep;
  ep.port = *port;
  switch (auth.host_type()) {
    case boost::urls::host_type::ipv4:
      ep.host = auth.host_ipv4_address().to_string();
      break;
    case boost::urls::host_type::ipv6:
      ep.host = auth.host_ipv6_address().to_string();
      break;
    case boost::urls::host_type::name: {
      ep.host = lower(auth.host_address());  // percent-decoded
      if (auto problem = host_name_problem(ep.host)) return bad(what, text, *problem);
      break;
    }
    default:
      return bad(what, text, "unsupported address form");
  }
  return ep;
}

}  // namespace runsnack
