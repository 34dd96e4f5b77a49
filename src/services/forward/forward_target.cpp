#include "services/forward/forward_target.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace runsnack {

namespace {

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > kMaxTargetNameBytes) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool valid_host(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_';
  });
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "HOST:PORT" or "[V6]:PORT" -> host, port.
Result<std::pair<std::string, std::uint16_t>> split_host_port(std::string_view text) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return fail(errc::invalid_argument, "expected [ADDRESS]:PORT");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail(errc::invalid_argument, "expected HOST:PORT");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return fail(errc::invalid_argument, "put an IPv6 address in brackets");
  }
  if (!valid_host(host)) return fail(errc::invalid_argument, "bad host '" + std::string(host) + "'");
  auto p = parse_port(port);
  if (!p) return p.error();
  return std::pair<std::string, std::uint16_t>{std::string(host), *p};
}

}  // namespace

Result<std::uint16_t> parse_port(std::string_view text, bool allow_zero) {
  unsigned v = 0;
  if (!all_digits(text) || text.size() > 5) return fail(errc::invalid_argument, "bad port '" + std::string(text) + "'");
  std::from_chars(text.data(), text.data() + text.size(), v);
  if (v > 65535 || (v == 0 && !allow_zero)) return fail(errc::invalid_argument, "port out of range: " + std::string(text));
  return static_cast<std::uint16_t>(v);
}

std::string ForwardTarget::address() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<ForwardTarget> parse_expose(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return fail(errc::invalid_argument, "bad --expose '" + std::string(text.substr(0, 200)) + "': " + why +
                                            " (expected PORT, NAME=PORT or NAME=HOST:PORT[,host-header])");
  };
  ForwardTarget t;
  std::string_view rest = text;
  if (auto comma = rest.find(','); comma != std::string_view::npos) {
    std::string_view opt = rest.substr(comma + 1);
    if (opt != "host-header") return bad("unknown option '" + std::string(opt.substr(0, 40)) + "'");
    t.host_header = true;
    rest = rest.substr(0, comma);
  }
  auto eq = rest.find('=');
  std::string_view where = rest;
  if (eq != std::string_view::npos) {
    std::string_view name = rest.substr(0, eq);
    if (!valid_name(name)) return bad("a name is 1-64 of A-Z a-z 0-9 . _ -");
    t.name = std::string(name);
    where = rest.substr(eq + 1);
  }
  if (all_digits(where)) {
    auto p = parse_port(where);
    if (!p) return bad(p.error().what());
    t.port = *p;
  } else {
    if (eq == std::string_view::npos) return bad("name a target with another host as NAME=HOST:PORT");
    auto hp = split_host_port(where);
    if (!hp) return bad(hp.error().what());
    t.host = hp->first;
    t.port = hp->second;
  }
  if (t.name.empty()) t.name = std::to_string(t.port);
  return t;
}

Result<ForwardSpec> parse_forward_spec(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return fail(errc::invalid_argument, "bad forward '" + std::string(text.substr(0, 200)) + "': " + why +
                                            " (expected TARGET, LOCAL:TARGET or BIND:LOCAL:TARGET, e.g. 11434 or "
                                            "8080:jupyter)");
  };
  ForwardSpec spec;
  std::string_view rest = text;
  // BIND may be a bracketed IPv6 address.
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return bad("expected [ADDRESS]:LOCAL:TARGET");
    spec.bind = std::string(rest.substr(1, close - 1));
    if (!valid_host(spec.bind)) return bad("bad bind address");
    rest = rest.substr(close + 2);
    auto colon = rest.find(':');
    if (colon == std::string_view::npos) return bad("missing LOCAL port");
    auto p = parse_port(rest.substr(0, colon), true);
    if (!p) return bad(p.error().what());
    spec.local_port = *p;
    rest = rest.substr(colon + 1);
  } else {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    for (;;) {
      auto colon = rest.find(':', start);
      parts.push_back(rest.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
      if (colon == std::string_view::npos) break;
      start = colon + 1;
      if (parts.size() > 3) return bad("too many ':'");
    }
    if (parts.size() > 3) return bad("too many ':'");
    if (parts.size() == 3) {
      if (!valid_host(parts[0])) return bad("bad bind address '" + std::string(parts[0].substr(0, 60)) + "'");
      spec.bind = std::string(parts[0]);
    }
    if (parts.size() >= 2) {
      auto p = parse_port(parts[parts.size() - 2], true);
      if (!p) return bad(p.error().what());
      spec.local_port = *p;
    }
    rest = parts.back();
  }
  if (all_digits(rest)) {
    if (auto p = parse_port(rest); !p) return bad(p.error().what());
  } else if (!valid_name(rest)) {
    return bad("a target is a port or a name the provider exposed");
  }
  spec.target = std::string(rest);
  return spec;
}

nlohmann::json to_json(const ForwardTarget& t) {
  return {{"name", t.name}, {"host", t.host}, {"port", t.port}, {"host_header", t.host_header}};
}

Result<ForwardTarget> parse_forward_target(const nlohmann::json& j) {
  if (!j.is_object()) return fail(errc::malformed, "a forward target is not an object");
  ForwardTarget t;
  auto name = j.find("name");
  auto host = j.find("host");
  auto port = j.find("port");
  if (name == j.end() || !name->is_string() || !valid_name(name->get_ref<const std::string&>()))
    return fail(errc::malformed, "a forward target has no valid name");
  if (host == j.end() || !host->is_string() || !valid_host(host->get_ref<const std::string&>()))
    return fail(errc::malformed, "a forward target has no valid host");
  if (port == j.end() || !port->is_number_unsigned() || port->get<std::uint64_t>() == 0 ||
      port->get<std::uint64_t>() > 65535)
    return fail(errc::malformed, "a forward target has no valid port");
  t.name = name->get<std::string>();
  t.host = host->get<std::string>();
  t.port = static_cast<std::uint16_t>(port->get<std::uint64_t>());
  if (auto hh = j.find("host_header"); hh != j.end() && hh->is_boolean()) t.host_header = hh->get<bool>();
  return t;
}

nlohmann::json to_json(const ForwardTerms& terms) {
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : terms.targets) targets.push_back(to_json(t));
  return {{"targets", targets},
          {"max_connections", terms.max_connections ? nlohmann::json(*terms.max_connections) : nlohmann::json()}};
}

Result<ForwardTerms> parse_forward_terms(const nlohmann::json& j) {
  ForwardTerms terms;
  if (j.is_null()) return terms;
  if (!j.is_object()) return fail(errc::malformed, "forward terms are not an object");
  if (auto t = j.find("targets"); t != j.end()) {
    if (!t->is_array() || t->size() > kMaxForwardTargets) return fail(errc::malformed, "bad forward target list");
    for (const auto& item : *t) {
      auto target = parse_forward_target(item);
      if (!target) return target.error();
      terms.targets.push_back(std::move(*target));
    }
  }
  if (auto m = j.find("max_connections"); m != j.end() && !m->is_null()) {
    if (!m->is_number_integer() || m->get<std::int64_t>() <= 0) return fail(errc::malformed, "bad max_connections");
    terms.max_connections = m->get<std::int64_t>();
  }
  return terms;
}

const ForwardTarget* find_target(const std::vector<ForwardTarget>& targets, std::string_view wanted) {
  for (const auto& t : targets)
    if (t.name == wanted) return &t;
  if (all_digits(wanted)) {
    for (const auto& t : targets)
      if (std::to_string(t.port) == wanted) return &t;
  }
  return nullptr;
}

Result<std::int64_t> parse_bandwidth(std::string_view text) {
  auto bad = [&] {
    return fail(errc::invalid_argument, "bad --bandwidth '" + std::string(text.substr(0, 60)) +
                                            "': expected e.g. 10mbit, 500kbit, 1gbit, 2MB, 64KB or bytes per second");
  };
  std::size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  if (digits == 0 || digits > 12) return bad();
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc() || ptr != text.data() + digits || !(value > 0)) return bad();
  std::string unit(text.substr(digits));
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view u = unit;
  if (u.ends_with("/s")) u.remove_suffix(2);
  double factor = 0;
  if (u.empty() || u == "b") factor = 1;
  else if (u == "kbit") factor = 1e3 / 8;
  else if (u == "mbit") factor = 1e6 / 8;
  else if (u == "gbit") factor = 1e9 / 8;
  else if (u == "kb") factor = 1e3;
  else if (u == "mb") factor = 1e6;
  else if (u == "gb") factor = 1e9;
  else return bad();
  double bytes = value * factor;
  if (bytes < 1 || bytes > 1e12) return bad();
  return static_cast<std::int64_t>(bytes);
}

}  // namespace runsnack
