// libFuzzer: the rendezvous' decisions (registry.hpp) driven by arbitrary
// messages from up to 16 connections on 4 addresses, as rdv_server.cpp feeds
// them: registrations, proofs, introductions, relay claims, disconnects and
// time passing. The fuzzer holds one real identity and can answer a
// challenge with a valid proof for it; every other PeerId is unprovable. So:
// every registration must be that identity's, introductions and relay slots
// exist only for registered connections, a token opens only its own side
// once, a claimed slot names the proven key (what relay budgets are charged
// to), and every count stays within RegistryLimits.
#include "crypto/identity.hpp"
#include "rendezvous/registry.hpp"
#include "session/message.hpp"
#include "core/base32.hpp"

#include <cstdlib>
#include <map>
#include <set>
#include <string>

namespace {

using namespace runsnack;
using namespace runsnack::rdv;

const Identity& identity() {
  static Identity id = Identity::generate().value();
  return id;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RegistryLimits limits;
  limits.max_providers = 8;
  limits.max_registrations_per_peer = 2;
  limits.max_unproven_per_ip = 3;
  limits.max_pending_intros_per_ip = 2;
  limits.max_relay_sides_per_ip = 3;
  Registry reg(limits);
  SteadyTime now{};
  std::map<ConnId, std::array<std::uint8_t, 32>> nonces;
  std::map<ConnId, std::string> claimed_peer;
  std::vector<std::string> tokens;  // minted, in order
  std::multiset<std::string> relay_ips;
  const std::string mine = identity().peer_id().str();
  std::uint32_t token_seq = 0;
  auto token = [&] {
    std::string t = base32::encode(std::array<std::uint8_t, 16>{static_cast<std::uint8_t>(token_seq >> 8),
                                                               static_cast<std::uint8_t>(token_seq)});
    ++token_seq;
    t.resize(kTokenLength);
    return t;
  };

  std::size_t i = 0;
  while (i + 3 <= size) {
    const ConnId conn = data[i] & 15;
    const std::string ip = "192.0.2." + std::to_string((data[i] >> 4) & 3);
    const std::uint8_t op = data[i + 1];
    const std::size_t len = std::min<std::size_t>(data[i + 2], size - i - 3);
    std::span<const std::uint8_t> body(data + i + 3, len);
    i += 3 + len;
    now += std::chrono::milliseconds(op * 37);

    switch (op % 8) {
      case 0: {  // a message, as the server would act on it
        auto m = decode(body);
        if (!m) break;
        if (auto* r = std::get_if<Register>(&*m)) {
          if (reg.registration(conn)) {
            (void)reg.update(conn, *r);
          } else {
            std::array<std::uint8_t, 32> nonce{};
            nonce[0] = static_cast<std::uint8_t>(op);
            nonce[1] = static_cast<std::uint8_t>(conn);
            if (op & 0x80) r->peer = mine;  // sometimes claim the provable PeerId
            if (reg.challenge(conn, *r, ip, Endpoint{"192.0.2.1", 1}, nonce)) {
              nonces[conn] = nonce;
              claimed_peer[conn] = r->peer;
            }
          }
        } else if (auto* p = std::get_if<Prove>(&*m)) {
          (void)reg.prove(conn, *p);
        } else if (auto* c = std::get_if<Connect>(&*m)) {
          if (!reg.begin_intro(ip)) break;
          if (const Registration* r = reg.serving(c->peer, c->grant)) {
            if (r->peer != c->peer) std::abort();
            auto t = reg.open_relay(r->conn, token(), token(), now);
            if (t) tokens.push_back(t->provider), tokens.push_back(t->consumer);
          }
          reg.end_intro(ip);
        } else if (auto* rel = std::get_if<Relay>(&*m)) {
          if (reg.claim_relay(rel->token, rel->side, ip, now)) relay_ips.insert(ip);
        }
        break;
      }
      case 1: {  // the valid proof for this connection's challenge, when it claimed our PeerId
        auto n = nonces.find(conn);
        if (n == nonces.end() || claimed_peer[conn] != mine) break;
        auto sig = identity().sign(registration_proof_message(n->second, mine));
        (void)reg.prove(conn, Prove{base32::encode(identity().public_key_raw()), base32::encode(*sig)});
        nonces.erase(n);
        break;
      }
      case 2:  // the connection ends
        reg.remove(conn);
        nonces.erase(conn);
        break;
      case 3: {  // a relay connection presents a minted token, as either side
        if (tokens.empty()) break;
        const std::string& t = tokens[body.empty() ? 0 : body[0] % tokens.size()];
        const char* side = (op & 0x10) ? "provider" : "consumer";
        auto claim = reg.claim_relay(t, side, ip, now);
        if (claim) {
          relay_ips.insert(ip);
          // Tokens alternate provider, consumer: a token opens only its own side.
          std::size_t index = static_cast<std::size_t>(&t - tokens.data());
          if ((index % 2 == 0) != (std::string(side) == "provider")) std::abort();
          // The relay budgets and the operator's key list are charged to the slot's provider: the proven key.
          if (claim->peer != mine) std::abort();
          if (reg.claim_relay(t, side, ip, now)) std::abort();  // and only once
        }
        break;
      }
      case 4:  // a relay side leaves
        if (auto it = relay_ips.find(ip); it != relay_ips.end()) {
          reg.relay_side_ended(ip);
          relay_ips.erase(it);
        }
        break;
      case 5:
        now += std::chrono::seconds(op);
        (void)reg.expire(now);
        break;
      case 6:
        reg.set_rtt(conn, std::chrono::milliseconds(op));
        break;
      default:
        break;
    }
    // Invariants.
    if (reg.providers() > limits.max_providers) std::abort();
    if (reg.unproven() > 4 * limits.max_unproven_per_ip) std::abort();
    for (ConnId c = 0; c < 16; ++c)
      if (const Registration* r = reg.registration(c); r && r->peer != mine) std::abort();
  }
  return 0;
}
