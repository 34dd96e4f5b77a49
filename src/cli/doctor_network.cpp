#include "cli/doctor_network.hpp"

#include "cli/link_arg.hpp"
#include "cli/state.hpp"
#include "consumer/consumer.hpp"
#include "core/json_fields.hpp"
#include "crypto/identity.hpp"
#include "net/port_mapping.hpp"
#include "net/punch.hpp"
#include "services/info_service.hpp"
#include "signaling/rdv_client.hpp"
#include "signaling/rdv_codec.hpp"
#include "signaling/rdv_io.hpp"

#include <cstdio>
#include <ifaddrs.h>
#include <netdb.h>
#include <set>
#include <sys/socket.h>

namespace runsnack::cli::doctor {

namespace asio = boost::asio;

std::future<Check> probe_router(std::uint16_t port) {
  return std::async(std::launch::async, [port]() -> Check {
    std::string why;
    auto mapping = PortMapping::create(port, 60, why);
    if (mapping)
      return {"router", "ok",
              mapping->protocol() + ": the router maps " + mapping->external().str() + " to this machine's port " +
                  std::to_string(port) + " (removed again); share puts that address in its links",
              ""};
    while (!why.empty() && (why.back() == ' ' || why.back() == ';')) why.pop_back();
    return {"router", "warn", "no port mapping from the router (" + why + ")",
            "consumers outside this network can still connect through a rendezvous (share --rendezvous "
            "HOST:PORT); or enable UPnP/NAT-PMP on the router, or forward TCP port " + std::to_string(port) +
                " to this machine by hand"};
  });
}

namespace {

std::set<std::string> local_addresses() {
  std::set<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    char host[NI_MAXHOST];
    socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::getnameinfo(i->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0) {
      std::string h = host;
      if (auto pct = h.find('%'); pct != std::string::npos) h.resize(pct);
      out.insert(h);
    }
  }
  ::freeifaddrs(list);
  return out;
}

struct Seen {
  Endpoint local, observed;
};

asio::awaitable<Result<Seen>> register_once(const Endpoint& server, const Identity& identity,
                                            std::chrono::milliseconds timeout) {
  const std::string peer = identity.peer_id().str();
  auto socket = co_await connect_endpoint(server, timeout);
  if (!socket) co_return socket.error();
  boost::system::error_code ec;
  Seen seen;
  seen.local = to_endpoint(socket->local_endpoint(ec));
  rdv::Message reg = rdv::Register{peer, {}, {}, std::nullopt};
  if (auto w = co_await rdv::write_message(*socket, reg, timeout); !w) co_return w.error();
  auto answer = co_await rdv::read_message(*socket, timeout);
  if (!answer) co_return answer.error();
  // The rendezvous asks us to prove the PeerId before it registers anyone.
  if (auto* challenge = std::get_if<rdv::Challenge>(&*answer)) {
    auto proof = rdv::prove_registration(identity, peer, *challenge);
    if (!proof) co_return proof.error();
    const rdv::Message prove = *proof;
    if (auto w = co_await rdv::write_message(*socket, prove, timeout); !w) co_return w.error();
    answer = co_await rdv::read_message(*socket, timeout);
    if (!answer) co_return answer.error();
  }
  if (auto* err = std::get_if<rdv::ErrorMsg>(&*answer)) co_return fail(errc::refused, "the rendezvous said: " + err->reason);
  auto* ok = std::get_if<rdv::Registered>(&*answer);
  if (!ok) co_return fail(errc::malformed, "the rendezvous answered something other than `registered`");
  seen.observed = ok->observed;
  socket->close(ec);
  co_return seen;
}

}  // namespace

asio::awaitable<Check> check_nat(Endpoint rendezvous, std::chrono::milliseconds timeout) {
  // A throwaway identity: registering this machine's own PeerId would displace a running share's registration.
  auto id = Identity::generate();
  if (!id) co_return Check{"nat", "fail", id.error().what(), ""};
  auto first = co_await register_once(rendezvous, *id, timeout);
  if (!first)
    co_return Check{"nat", "fail", "rendezvous " + rendezvous.str() + ": " + first.error().message,
                    "check the address (share --rendezvous, RUNSNACK_RENDEZVOUS or config.json) and that "
                    "`runsnack rendezvous` runs there and its port is open"};
  auto second = co_await register_once(rendezvous, *id, timeout);
  const Seen& a = *first;
  std::string seen = "rendezvous " + rendezvous.str() + " sees this machine as " + a.observed.host;
  if (local_addresses().count(a.observed.host))
    co_return Check{"nat", "ok", seen + ", its own address: no NAT on the way; consumers dial it directly", ""};
  bool kept = a.observed.port == a.local.port && (!second || second->observed.port == second->local.port);
  std::string ports = "port " + std::to_string(a.local.port) + " -> " + std::to_string(a.observed.port);
  if (second) ports += ", " + std::to_string(second->local.port) + " -> " + std::to_string(second->observed.port);
  if (kept)
    co_return Check{"nat", "ok", seen + " behind a NAT that keeps ports (" + ports +
                                     "): hole punching should work; the link works through the rendezvous", ""};
  co_return Check{"nat", "warn", seen + " behind a NAT that changes ports (" + ports +
                                     "): hole punching may fail; then the rendezvous relays (docs/NAT.md)",
                  "a port mapping (router) or a forwarded port gives consumers a direct path"};
}

asio::awaitable<Check> check_link(std::string link_arg, std::chrono::milliseconds timeout) {
  auto link = resolve_link(link_arg);
  if (!link) co_return Check{"link", "fail", link.error().what(), "paste the whole link as `runsnack share` printed it"};
  auto identity = open_identity();
  if (!identity) co_return Check{"link", "fail", identity.error().what(), ""};
  auto consumer = Consumer::create(*identity);
  if (!consumer) co_return Check{"link", "fail", consumer.error().what(), ""};
  ConnectOptions options;
  options.timeout = timeout;
  auto session = co_await (*consumer)->connect(*link, options);
  if (!session) {
    const Error& e = session.error();
    std::string fix = e.is(errc::timeout) || e.is(errc::io_error) || e.is(errc::closed)
                          ? "the provider does not answer at the link's addresses: is `runsnack share` (or "
                            "runsnack-share.service) running there? When both sides are behind NAT the link needs "
                            "a rendezvous (share --rendezvous); `runsnack doctor` on the provider checks its side"
                          : "ask the provider for a new link (`runsnack links` there shows its state)";
    co_return Check{"link", "fail", e.what(), fix};
  }
  auto info = co_await fetch_info(**session);
  if (!info) co_return Check{"link", "fail", "connected, but the info request failed: " + info.error().message, ""};
  const auto& j = *info;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s via %s | setup %.1f ms | rtt %.2f ms | bandwidth %.0f Mbit/s",
                string_or(j, "path", "?").c_str(), string_or(j, "address", "?").c_str(), number_or(j, "setup_ms", 0),
                number_or(j, "rtt_ms", 0), number_or(j, "bandwidth_mbps", 0));
  std::string detail = buf;
  if (j.contains("grant") && j["grant"].is_object() && j["grant"].contains("services") && j["grant"]["services"].is_array()) {
    std::string services;
    for (const auto& s : j["grant"]["services"])
      if (s.is_string()) services += (services.empty() ? "" : ",") + s.get<std::string>();
    detail += " | allows " + services;
  }
  co_return Check{"link", "ok", detail, ""};
}

}  // namespace runsnack::cli::doctor
