#pragma once
// The service contract (docs/ARCHITECTURE.md section 6): what every service's
// provider half receives with a stream, and the router that names them.
// Services depend on this header only; the provider fills in the context
// (provider/provider.cpp) and routes each stream by its header's service name
// (provider/service_router.cpp: default_services()) after checking the grant.

#include "crypto/peer_id.hpp"
#include "link/grant.hpp"
#include "net/mux_stream.hpp"
#include "session/command_record.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace runsnack {

// Writes one audit record for this session (grant, peer and address filled in
// by the provider): kind, decision ("accept"|"refuse"), reason, detail.
using ServiceAudit = std::function<void(const std::string& kind, const std::string& decision,
                                        const std::string& reason, const nlohmann::json& detail)>;

// One per stream, as of the stream's opening.
struct ServiceContext {
  std::string session_id;
  PeerId consumer;
  Grant grant;
  // For services that log per use themselves (forward: one record per
  // connection; run, cp, shell: per command; cuda: per server). May be empty (tests).
  ServiceAudit audit;
  // Where the session comes from: "IP:PORT", or "relay IP:PORT" (the relay's
  // address) for a relayed session.
  std::string address;
  // Records each command a service runs for this session (`runsnack sessions`); may be empty.
  CommandRecorder record_command;
};

using ServiceHandler = std::function<boost::asio::awaitable<void>(std::shared_ptr<MuxStream> stream,
                                                                  const nlohmann::json& args,
                                                                  const ServiceContext& context)>;

struct ServiceEntry {
  ServiceHandler handler;
  // The grant service that must be allowed for this stream ("probe" rides on "info").
  std::string requires_grant_service;
  bool audited = true;  // write each use to the audit log
  // ServiceContext::audit's records are written in batches, a fraction of a
  // second late (Provider::audit_batched): for services that log every
  // connection, at rates where a transaction per record would cost more
  // than the connection.
  bool batch_audit = false;
};

class ServiceRouter {
 public:
  void add(const std::string& name, ServiceEntry entry) { services_[name] = std::move(entry); }
  const ServiceEntry* find(const std::string& name) const {
    auto it = services_.find(name);
    return it == services_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, ServiceEntry> services_;
};

}  // namespace runsnack
