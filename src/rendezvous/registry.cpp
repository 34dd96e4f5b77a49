#include "rendezvous/registry.hpp"

#include "core/base32.hpp"
#include "crypto/identity.hpp"

#include <algorithm>

namespace runsnack::rdv {

void Registry::count_down(std::map<std::string, std::size_t>& counts, const std::string& ip) {
  auto it = counts.find(ip);
  if (it == counts.end()) return;
  if (--it->second == 0) counts.erase(it);
}

Result<Challenge> Registry::challenge(ConnId conn, Register reg, const std::string& ip, Endpoint observed,
                                      const std::array<std::uint8_t, 32>& nonce) {
  if (unproven_.contains(conn) || registered_.contains(conn))
    return fail(errc::malformed, "this connection already registered");
  if (registered_.size() >= limits_.max_providers) return fail(errc::exhausted, "rendezvous full");
  auto& pending = unproven_per_ip_[ip];
  if (pending >= limits_.max_unproven_per_ip) {
    if (pending == 0) unproven_per_ip_.erase(ip);
    return fail(errc::exhausted, "too many registrations waiting for their proof from your address");
  }
  ++pending;
  unproven_.emplace(conn, Unproven{std::move(reg), ip, std::move(observed), nonce});
  return Challenge{base32::encode(nonce)};
}

Result<std::optional<ConnId>> Registry::prove(ConnId conn, const Prove& proof) {
  auto it = unproven_.find(conn);
  if (it == unproven_.end()) return fail(errc::malformed, "a proof without a challenge");
  Unproven u = std::move(it->second);
  unproven_.erase(it);
  count_down(unproven_per_ip_, u.ip);

  auto key = base32::decode(proof.key);
  auto sig = base32::decode(proof.sig);
  auto peer = PeerId::parse(u.reg.peer);
  if (!key || key->size() != 32 || !sig || !peer) return fail(errc::auth_failed, "malformed proof");
  const auto message = registration_proof_message(u.nonce, u.reg.peer);
  if (!Identity::verify(*peer, std::span<const std::uint8_t, 32>(key->data(), 32), message, *sig))
    return fail(errc::auth_failed, "the proof does not come from the key of PeerId " + u.reg.peer);

  // The key's oldest registration makes room for this one.
  std::optional<ConnId> displaced;
  auto [first, last] = by_peer_.equal_range(u.reg.peer);
  if (static_cast<std::size_t>(std::distance(first, last)) >= limits_.max_registrations_per_peer) {
    auto oldest = std::min_element(first, last, [&](const auto& a, const auto& b) {
      return registered_.at(a.second).order < registered_.at(b.second).order;
    });
    displaced = oldest->second;
    remove(oldest->second);
  }
  if (registered_.size() >= limits_.max_providers) return fail(errc::exhausted, "rendezvous full");
  Registration r;
  r.conn = conn;
  r.peer = u.reg.peer;
  r.ip = u.ip;
  r.observed = std::move(u.observed);
  r.grants = std::move(u.reg.grants);
  r.candidates = std::move(u.reg.candidates);
  r.mapped = u.reg.mapped;
  r.order = next_order_++;
  by_peer_.emplace(r.peer, conn);
  registered_.emplace(conn, std::move(r));
  return displaced;
}

Result<void> Registry::update(ConnId conn, const Register& reg) {
  auto it = registered_.find(conn);
  if (it == registered_.end()) return fail(errc::malformed, "not registered");
  if (reg.peer != it->second.peer) return fail(errc::auth_failed, "a registration cannot change its PeerId");
  it->second.grants = reg.grants;
  it->second.candidates = reg.candidates;
  it->second.mapped = reg.mapped;
  return {};
}

void Registry::set_rtt(ConnId conn, std::chrono::milliseconds rtt) {
  if (auto it = registered_.find(conn); it != registered_.end()) it->second.rtt = rtt;
}

void Registry::remove(ConnId conn) {
  if (auto u = unproven_.find(conn); u != unproven_.end()) {
    count_down(unproven_per_ip_, u->second.ip);
    unproven_.erase(u);
  }
  auto it = registered_.find(conn);
  if (it == registered_.end()) return;
  auto [first, last] = by_peer_.equal_range(it->second.peer);
  for (auto p = first; p != last; ++p) {
    if (p->second == conn) {
      by_peer_.erase(p);
      break;
    }
  }
  registered_.erase(it);
}

const Registration* Registry::registration(ConnId conn) const {
  auto it = registered_.find(conn);
  return it == registered_.end() ? nullptr : &it->second;
}

const Registration* Registry::serving(const std::string& peer, const std::string& grant) const {
  const Registration* best = nullptr;
  auto [first, last] = by_peer_.equal_range(peer);
  for (auto p = first; p != last; ++p) {
    const Registration& r = registered_.at(p->second);
    if (std::find(r.grants.begin(), r.grants.end(), grant) == r.grants.end()) continue;
    if (!best || r.order > best->order) best = &r;
  }
  return best;
}

bool Registry::begin_intro(const std::string& ip) {
  auto& n = intros_per_ip_[ip];
  if (n >= limits_.max_pending_intros_per_ip) {
    if (n == 0) intros_per_ip_.erase(ip);
    return false;
  }
  ++n;
  return true;
}

void Registry::end_intro(const std::string& ip) { count_down(intros_per_ip_, ip); }

Result<RelayTokens> Registry::open_relay(ConnId provider, std::string provider_token, std::string consumer_token,
                                         SteadyTime now) {
  auto reg = registered_.find(provider);
  if (reg == registered_.end()) return fail(errc::not_found, "relay for an unregistered provider");
  if (provider_token == consumer_token || tokens_.contains(provider_token) || tokens_.contains(consumer_token))
    return fail(errc::internal, "relay token collision");
  std::uint64_t id = next_slot_++;
  Slot s;
  s.expires = now + limits_.relay_match_timeout;
  s.peer = reg->second.peer;
  s.tokens[static_cast<int>(RelaySide::provider)] = provider_token;
  s.tokens[static_cast<int>(RelaySide::consumer)] = consumer_token;
  slots_.emplace(id, std::move(s));
  tokens_[provider_token] = {id, RelaySide::provider};
  tokens_[consumer_token] = {id, RelaySide::consumer};
  return RelayTokens{id, std::move(provider_token), std::move(consumer_token)};
}

Result<RelayClaim> Registry::claim_relay(const std::string& token, const std::string& side, const std::string& ip,
                                         SteadyTime now) {
  auto t = tokens_.find(token);
  if (t == tokens_.end()) return fail(errc::not_found, "unknown or spent relay token");
  auto [id, token_side] = t->second;
  const char* side_name = token_side == RelaySide::provider ? "provider" : "consumer";
  if (side != side_name) return fail(errc::not_found, "unknown or spent relay token");
  auto s = slots_.find(id);
  if (s == slots_.end() || s->second.expires < now) return fail(errc::not_found, "unknown or spent relay token");
  auto& per_ip = relay_sides_per_ip_[ip];
  if (per_ip >= limits_.max_relay_sides_per_ip) {
    if (per_ip == 0) relay_sides_per_ip_.erase(ip);
    return fail(errc::exhausted, "too many relayed connections from your address");
  }
  ++per_ip;
  tokens_.erase(t);  // each token opens its side once
  Slot& slot = s->second;
  slot.arrived[static_cast<int>(token_side)] = true;
  RelayClaim claim{id, token_side, slot.arrived[0] && slot.arrived[1], slot.peer};
  if (claim.complete) {
    for (const auto& tok : slot.tokens) tokens_.erase(tok);
    slots_.erase(s);
  }
  return claim;
}

void Registry::relay_side_ended(const std::string& ip) { count_down(relay_sides_per_ip_, ip); }

std::vector<std::uint64_t> Registry::expire(SteadyTime now) {
  std::vector<std::uint64_t> gone;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second.expires < now) {
      for (const auto& tok : it->second.tokens) tokens_.erase(tok);
      gone.push_back(it->first);
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

}  // namespace runsnack::rdv
