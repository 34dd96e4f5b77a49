#include "signaling/rdv_codec.hpp"

#include "session/message.hpp"

namespace runsnack::rdv {

namespace {

using nlohmann::json;

bool is_base32(const std::string& s, std::size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7'))) return false;
  return true;
}

json endpoints_json(const std::vector<Endpoint>& eps) {
  json a = json::array();
  for (const auto& e : eps) a.push_back(e.str());
  return a;
}

Result<Endpoint> get_endpoint(const json& j, const char* key) {
  auto s = get_string(j, key, 64);
  if (!s) return s.error();
  return parse_endpoint(*s, key);
}

Result<std::vector<Endpoint>> get_endpoints(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return fail(errc::malformed, std::string("missing list '") + key + "'");
  if (it->size() > kMaxCandidates) return fail(errc::too_large, std::string("too many entries in '") + key + "'");
  std::vector<Endpoint> out;
  for (const auto& e : *it) {
    if (!e.is_string() || e.get_ref<const std::string&>().size() > 64)
      return fail(errc::malformed, std::string("bad entry in '") + key + "'");
    auto ep = parse_endpoint(e.get_ref<const std::string&>(), "candidate");
    if (!ep) return ep.error();
    out.push_back(std::move(*ep));
  }
  return out;
}

Result<std::optional<Endpoint>> get_optional_endpoint(const json& j, const char* key) {
  if (!j.contains(key)) return std::optional<Endpoint>{};
  auto e = get_endpoint(j, key);
  if (!e) return e.error();
  return std::optional<Endpoint>{*e};
}

Result<std::string> get_id(const json& j, const char* key, std::size_t len) {
  auto s = get_string(j, key, 128);
  if (!s) return s.error();
  if (!is_base32(*s, len)) return fail(errc::malformed, std::string("bad '") + key + "'");
  return s;
}

constexpr std::size_t kPeerIdChars = 32;
constexpr std::size_t kGrantIdChars = 10;

struct ToJson {
  json operator()(const Register& m) const {
    json j = {{"t", "register"}, {"peer", m.peer}, {"grants", m.grants}, {"candidates", endpoints_json(m.candidates)}};
    if (m.mapped) j["mapped"] = m.mapped->str();
    return j;
  }
  json operator()(const Challenge& m) const { return {{"t", "challenge"}, {"nonce", m.nonce}}; }
  json operator()(const Prove& m) const { return {{"t", "prove"}, {"key", m.key}, {"sig", m.sig}}; }
  json operator()(const Registered& m) const { return {{"t", "registered"}, {"observed", m.observed.str()}}; }
  json operator()(const Ping& m) const { return {{"t", "ping"}, {"n", m.n}}; }
  json operator()(const Pong& m) const { return {{"t", "pong"}, {"n", m.n}}; }
  json operator()(const Connect& m) const {
    return {{"t", "connect"}, {"peer", m.peer}, {"grant", m.grant}, {"candidates", endpoints_json(m.candidates)}};
  }
  json operator()(const Intro& m) const {
    json j = {{"t", "intro"},          {"token", m.token},     {"observed", m.observed.str()},
            {"peer_observed", m.peer_observed.str()}, {"candidates", endpoints_json(m.candidates)},
            {"delay_ms", m.delay_ms}, {"rtt_ms", m.rtt_ms},   {"relay", m.relay}};
    if (m.mapped) j["mapped"] = m.mapped->str();
    return j;
  }
  json operator()(const Relay& m) const { return {{"t", "relay"}, {"token", m.token}, {"side", m.side}}; }
  json operator()(const RelayOk&) const { return {{"t", "relay_ok"}}; }
  json operator()(const ErrorMsg& m) const { return {{"t", "error"}, {"reason", m.reason}}; }
};

}  // namespace

json to_json(const Message& m) { return std::visit(ToJson{}, m); }

Result<Message> from_json(const json& j) {
  auto t = get_string(j, "t", 16);
  if (!t) return t.error();
  if (*t == "register") {
    Register m;
    auto peer = get_id(j, "peer", kPeerIdChars);
    if (!peer) return peer.error();
    m.peer = *peer;
    auto it = j.find("grants");
    if (it == j.end() || !it->is_array()) return fail(errc::malformed, "missing list 'grants'");
    if (it->size() > kMaxGrants) return fail(errc::too_large, "too many grants");
    for (const auto& g : *it) {
      if (!g.is_string() || !is_base32(g.get_ref<const std::string&>(), kGrantIdChars))
        return fail(errc::malformed, "bad grant id");
      m.grants.push_back(g.get<std::string>());
    }
    auto c = get_endpoints(j, "candidates");
    if (!c) return c.error();
    m.candidates = std::move(*c);
    auto mapped = get_optional_endpoint(j, "mapped");
    if (!mapped) return mapped.error();
    m.mapped = *mapped;
    return Message{std::move(m)};
  }
  if (*t == "challenge") {
    auto nonce = get_id(j, "nonce", kNonceLength);
    if (!nonce) return nonce.error();
    return Message{Challenge{*nonce}};
  }
  if (*t == "prove") {
    auto key = get_id(j, "key", kKeyLength);
    if (!key) return key.error();
    auto sig = get_id(j, "sig", kSigLength);
    if (!sig) return sig.error();
    return Message{Prove{*key, *sig}};
  }
  if (*t == "registered") {
    auto o = get_endpoint(j, "observed");
    if (!o) return o.error();
    return Message{Registered{*o}};
  }
  if (*t == "ping" || *t == "pong") {
    auto n = get_int(j, "n");
    if (!n) return n.error();
    if (*t == "ping") return Message{Ping{*n}};
    return Message{Pong{*n}};
  }
  if (*t == "connect") {
    Connect m;
    auto peer = get_id(j, "peer", kPeerIdChars);
    if (!peer) return peer.error();
    auto grant = get_id(j, "grant", kGrantIdChars);
    if (!grant) return grant.error();
    auto c = get_endpoints(j, "candidates");
    if (!c) return c.error();
    m.peer = *peer;
    m.grant = *grant;
    m.candidates = std::move(*c);
    return Message{std::move(m)};
  }
  if (*t == "intro") {
    Intro m;
    auto token = get_id(j, "token", kTokenLength);
    if (!token) return token.error();
    auto o = get_endpoint(j, "observed");
    if (!o) return o.error();
    auto po = get_endpoint(j, "peer_observed");
    if (!po) return po.error();
    auto c = get_endpoints(j, "candidates");
    if (!c) return c.error();
    auto d = get_int(j, "delay_ms");
    if (!d) return d.error();
    auto r = get_int(j, "rtt_ms");
    if (!r) return r.error();
    auto relay = get_bool(j, "relay");
    if (!relay) return relay.error();
    if (*d < 0 || *d > 10000 || *r < 0 || *r > 60000) return fail(errc::malformed, "intro timing out of range");
    m.token = *token;
    m.observed = *o;
    m.peer_observed = *po;
    m.candidates = std::move(*c);
    m.delay_ms = *d;
    m.rtt_ms = *r;
    m.relay = *relay;
    auto mapped = get_optional_endpoint(j, "mapped");
    if (!mapped) return mapped.error();
    m.mapped = *mapped;
    return Message{std::move(m)};
  }
  if (*t == "relay") {
    auto token = get_id(j, "token", kTokenLength);
    if (!token) return token.error();
    auto side = get_string(j, "side", 16);
    if (!side) return side.error();
    if (*side != "provider" && *side != "consumer") return fail(errc::malformed, "bad relay side");
    return Message{Relay{*token, *side}};
  }
  if (*t == "relay_ok") return Message{RelayOk{}};
  if (*t == "error") {
    auto reason = get_string(j, "reason", 512);
    if (!reason) return reason.error();
    return Message{ErrorMsg{*reason}};
  }
  return fail(errc::unsupported, "unknown rendezvous message type");
}

Result<Message> decode(std::span<const std::uint8_t> body) {
  if (body.size() > kMaxRdvMessageBytes) return fail(errc::too_large, "rendezvous message too large");
  auto j = decode_message_body(body);
  if (!j) return j.error();
  return from_json(*j);
}

std::string encode(const Message& m) { return encode_message(to_json(m)); }

std::vector<std::uint8_t> registration_proof_message(std::span<const std::uint8_t> nonce, std::string_view peer) {
  static constexpr std::string_view kLabel = "runsnack rendezvous register v1";
  std::vector<std::uint8_t> out(kLabel.begin(), kLabel.end());
  out.push_back(0);
  out.insert(out.end(), nonce.begin(), nonce.end());
  out.insert(out.end(), peer.begin(), peer.end());
  return out;
}

}  // namespace runsnack::rdv
