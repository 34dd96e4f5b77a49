#include "provider/host.hpp"

#include "link/link.hpp"
#include "store/grant_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

namespace runsnack {

namespace asio = boost::asio;

namespace {

void log_failure(const char* what, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("{}: {}", what, ex.what());
  }
}

}  // namespace

std::string mint_link(const std::optional<Endpoint>& rendezvous, std::vector<Endpoint> candidates,
                      const PeerId& provider, const std::string& grant_id, const std::string& secret) {
  Link link;
  link.rendezvous = rendezvous;
  link.candidates = std::move(candidates);
  if (link.candidates.size() > kMaxLinkCandidates) link.candidates.resize(kMaxLinkCandidates);
  link.provider = provider;
  link.grant_id = grant_id;
  link.secret = secret;
  std::string text = format_link(link);
  while (rendezvous && text.size() > kMaxRendezvousLinkChars && !link.candidates.empty()) {
    link.candidates.pop_back();
    text = format_link(link);
  }
  return text;
}

ProviderHost::ProviderHost(asio::any_io_executor ex, const Identity& identity, Database& db, HostOptions options,
                           ServiceRouter services, HostEvents events)
    : ex_(ex),
      identity_(identity),
      db_(db),
      options_(std::move(options)),
      events_(std::move(events)),
      provider_(ex, identity, db, options_.provider, std::move(services),
                [this](const nlohmann::json& ev) {
                  if (events_.provider) events_.provider(ev);
                }),
      mapping_timer_(ex) {}

ProviderHost::~ProviderHost() = default;

Result<void> ProviderHost::listen() { return provider_.listen(); }

std::string ProviderHost::link(const std::string& grant_id, const std::string& secret) const {
  return mint_link(options_.rendezvous, provider_.candidates(), identity_.peer_id(), grant_id, secret);
}

void ProviderHost::start(std::function<void()> on_end) {
  asio::co_spawn(ex_, provider_.run(), [this, on_end = std::move(on_end)](std::exception_ptr e) {
    log_failure("provider", e);
    stop();
    if (on_end) on_end();
  });
  if (options_.rendezvous) {
    rdv::AgentConfig config;
    config.server = *options_.rendezvous;
    config.peer = identity_.peer_id().str();
    config.identity = &identity_;  // proves the PeerId to the rendezvous
    config.grants = [this] {
      std::vector<std::string> ids;
      GrantStore store(db_);
      if (auto list = store.list(false))
        for (const auto& g : *list) ids.push_back(g.id);
      return ids;
    };
    config.candidates = provider_.candidates();
    config.on_state = [this](const std::string& state) {
      if (events_.rendezvous) events_.rendezvous(state);
    };
    agent_ = std::make_unique<rdv::ProviderAgent>(ex_, std::move(config), [this](asio::ip::tcp::socket s, std::string path) {
      provider_.adopt(std::move(s), std::move(path));
    });
    asio::co_spawn(ex_, agent_->run(), [](std::exception_ptr e) { log_failure("rendezvous agent", e); });
  }
  if (options_.port_mapping && !provider_.local_endpoint().address().is_loopback()) ask_for_mapping();
}

void ProviderHost::stop() {
  if (stopping_) return;
  stopping_ = true;
  provider_.stop();
  if (agent_) agent_->stop();
  mapping_timer_.cancel();
}

// The router's answer (NAT-PMP, then UPnP: seconds where no router answers)
// on a thread of its own; the provider serves meanwhile.
void ProviderHost::ask_for_mapping() {
  mapping_asker_ = std::jthread([this, port = provider_.local_endpoint().port()] {
    MappingAnswer a;
    a.mapping = PortMapping::create(port, kMappingLease.count(), a.why);
    mapping_promise_.set_value(std::move(a));
    asio::post(ex_, [this] { take_mapping_answer(); });
  });
}

void ProviderHost::take_mapping_answer() {
  MappingAnswer a = mapping_answer_.get();
  if (!a.mapping) {
    if (events_.not_mapped) events_.not_mapped(a.why);
    return;
  }
  mapping_ = std::move(a.mapping);  // removed from the router when the host goes
  if (stopping_) return;            // no renewal timer to keep the executor busy, no announcement
  if (events_.mapped) events_.mapped(*mapping_);
  if (agent_) agent_->set_mapped(mapping_->external());
  renew_mapping_later();
}

void ProviderHost::renew_mapping_later() {
  mapping_timer_.expires_after(kMappingLease / 2);
  mapping_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    std::string why;
    if (mapping_->renew(kMappingLease.count(), why)) spdlog::debug("port mapping renewed: {}", mapping_->external().str());
    else spdlog::warn("port mapping renewal failed: {}", why);
    renew_mapping_later();
  });
}

}  // namespace runsnack
