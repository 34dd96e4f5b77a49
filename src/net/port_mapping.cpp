#include "net/port_mapping.hpp"

#include <miniupnpc/miniupnpc.h>
#include <miniupnpc/upnpcommands.h>
#include <natpmp.h>

#include <arpa/inet.h>
#include <sys/select.h>

#include <spdlog/spdlog.h>

#include <chrono>

namespace runsnack {

namespace {

constexpr auto kNatPmpBudget = std::chrono::milliseconds(2500);

// One NAT-PMP request/response, bounded by kNatPmpBudget.
bool natpmp_roundtrip(natpmp_t& n, natpmpresp_t& resp) {
  auto deadline = std::chrono::steady_clock::now() + kNatPmpBudget;
  for (;;) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(n.s, &fds);
    timeval tv{0, 250000};
    ::select(n.s + 1, &fds, nullptr, nullptr, &tv);
    int r = readnatpmpresponseorretry(&n, &resp);
    if (r >= 0) return true;
    if (r != NATPMP_TRYAGAIN || std::chrono::steady_clock::now() > deadline) return false;
  }
}

bool natpmp_map(std::uint16_t port, std::uint32_t lifetime, Endpoint& external, std::string& why) {
  natpmp_t n;
  if (initnatpmp(&n, 0, 0) < 0) {
    why += "NAT-PMP: no gateway; ";
    return false;
  }
  natpmpresp_t resp{};
  bool ok = sendpublicaddressrequest(&n) >= 0 && natpmp_roundtrip(n, resp) &&
            resp.type == NATPMP_RESPTYPE_PUBLICADDRESS;
  if (ok) {
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &resp.pnu.publicaddress.addr, buf, sizeof buf);
    external.host = buf;
    ok = sendnewportmappingrequest(&n, NATPMP_PROTOCOL_TCP, port, port, lifetime) >= 0 && natpmp_roundtrip(n, resp) &&
         resp.type == NATPMP_RESPTYPE_TCPPORTMAPPING;
    if (ok) external.port = resp.pnu.newportmapping.mappedpublicport;
  }
  if (!ok) why += "NAT-PMP: no answer or refused; ";
  closenatpmp(&n);
  return ok;
}

void natpmp_unmap(std::uint16_t port) {
  natpmp_t n;
  if (initnatpmp(&n, 0, 0) < 0) return;
  natpmpresp_t resp{};
  if (sendnewportmappingrequest(&n, NATPMP_PROTOCOL_TCP, port, 0, 0) >= 0) (void)natpmp_roundtrip(n, resp);
  closenatpmp(&n);
}

}  // namespace

std::unique_ptr<PortMapping> PortMapping::create(std::uint16_t internal_port, std::uint32_t lifetime_s,
                                                 std::string& why) {
  std::unique_ptr<PortMapping> m(new PortMapping());
  m->internal_port_ = internal_port;
  if (natpmp_map(internal_port, lifetime_s, m->external_, why)) {
    m->protocol_ = "nat-pmp";
    return m;
  }
  int err = 0;
  UPNPDev* devs = upnpDiscover(1500, nullptr, nullptr, 0, 0, 2, &err);
  if (!devs) {
    why += "UPnP: no IGD found";
    return nullptr;
  }
  UPNPUrls urls{};
  IGDdatas data{};
  char lan[64] = {};
  int igd = UPNP_GetValidIGD(devs, &urls, &data, lan, sizeof lan);
  freeUPNPDevlist(devs);
  if (igd == 0) {
    why += "UPnP: no IGD found";
    return nullptr;
  }
  char ext_ip[64] = {};
  UPNP_GetExternalIPAddress(urls.controlURL, data.first.servicetype, ext_ip);
  const std::string port = std::to_string(internal_port);
  const std::string lease = std::to_string(lifetime_s);
  int r = UPNP_AddPortMapping(urls.controlURL, data.first.servicetype, port.c_str(), port.c_str(), lan, "runsnack",
                              "TCP", nullptr, lease.c_str());
  if (r != UPNPCOMMAND_SUCCESS || ext_ip[0] == 0) {
    why += "UPnP: AddPortMapping failed (" + std::to_string(r) + ")";
    FreeUPNPUrls(&urls);
    return nullptr;
  }
  m->protocol_ = "upnp";
  m->external_ = Endpoint{ext_ip, internal_port};
  m->upnp_control_url_ = urls.controlURL;
  m->upnp_service_type_ = data.first.servicetype;
  m->upnp_lan_address_ = lan;
  FreeUPNPUrls(&urls);
  return m;
}

bool PortMapping::renew(std::uint32_t lifetime_s, std::string& why) {
  if (protocol_ == "nat-pmp") {
    Endpoint again;
    if (!natpmp_map(internal_port_, lifetime_s, again, why)) return false;
    if (!(again == external_)) spdlog::warn("port mapping moved from {} to {}", external_.str(), again.str());
    external_ = again;
    return true;
  }
  const std::string port = std::to_string(internal_port_);
  const std::string lease = std::to_string(lifetime_s);
  int r = UPNP_AddPortMapping(upnp_control_url_.c_str(), upnp_service_type_.c_str(), port.c_str(), port.c_str(),
                              upnp_lan_address_.c_str(), "runsnack", "TCP", nullptr, lease.c_str());
  if (r != UPNPCOMMAND_SUCCESS) why += "UPnP: AddPortMapping (renewal) failed (" + std::to_string(r) + ")";
  return r == UPNPCOMMAND_SUCCESS;
}

PortMapping::~PortMapping() {
  if (protocol_ == "nat-pmp") {
    natpmp_unmap(internal_port_);
  } else if (protocol_ == "upnp") {
    const std::string port = std::to_string(internal_port_);
    UPNP_DeletePortMapping(upnp_control_url_.c_str(), upnp_service_type_.c_str(), port.c_str(), "TCP", nullptr);
  }
  spdlog::debug("port mapping {} removed", external_.str());
}

}  // namespace runsnack
