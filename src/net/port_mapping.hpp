#pragma once
// Port mapping on the provider's router (docs/ARCHITECTURE.md section 5.1):
// NAT-PMP (libnatpmp) first, then UPnP-IGD (miniupnpc). The mapping lives as
// long as the PortMapping object: the destructor removes it. Blocking calls,
// each bounded (about 2 s per protocol), made once at start and once at exit.
//
// UPnP: miniupnpc reports an IGD whose external address is reserved (TEST-NET
// in the NAT lab, CGNAT space in the wild) as "not connected"; we still use
// it, since the mapping itself works (LAB-NOTES.md).

#include "link/endpoint.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace runsnack {

class PortMapping {
 public:
  // Maps TCP `internal_port` of this host to the same (or a router-chosen)
  // external port. nullopt when no router answers or it refuses; `why` then
  // says what each protocol reported.
  static std::unique_ptr<PortMapping> create(std::uint16_t internal_port, std::uint32_t lifetime_s, std::string& why);
  ~PortMapping();
  PortMapping(const PortMapping&) = delete;
  PortMapping& operator=(const PortMapping&) = delete;

  // Asks the router again for the same mapping, so that it outlives its
  // lease; call it well before the lease ends (the share does at half of it).
  // Blocking, bounded like create(). False (and `why`) when the router no
  // longer answers or refuses; the old mapping then lapses at its lease end.
  bool renew(std::uint32_t lifetime_s, std::string& why);

  const Endpoint& external() const { return external_; }
  const std::string& protocol() const { return protocol_; }  // "nat-pmp" | "upnp"

 private:
  PortMapping() = default;
  Endpoint external_;
  std::string protocol_;
  std::uint16_t internal_port_ = 0;
  std::string upnp_control_url_, upnp_service_type_, upnp_lan_address_;
};

}  // namespace runsnack
