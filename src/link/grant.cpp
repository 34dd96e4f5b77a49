#include "link/grant.hpp"

namespace runsnack {
namespace {
GrantDecision refuse(errc code, std::string reason) { return {false, code, std::move(reason)}; }
}  // namespace

GrantDecision check_grant(const Grant& grant, TimePoint now, std::int64_t live_sessions,
                          const std::string& consumer_peer) {
  if (grant.revoked) return refuse(errc::revoked, "link revoked by the provider");
  if (grant.expires && now >= *grant.expires)
    return refuse(errc::expired, "link expired at " + rfc3339(*grant.expires));
  if (grant.max_uses && grant.uses >= *grant.max_uses)
    return refuse(errc::exhausted, "link used up (" + std::to_string(*grant.max_uses) + " uses allowed)");
  if (grant.max_sessions && live_sessions >= *grant.max_sessions)
    return refuse(errc::exhausted,
                  "too many sessions on this link (" + std::to_string(*grant.max_sessions) + " allowed at once)");
  if (grant.bound_peer && *grant.bound_peer != consumer_peer)
    return refuse(errc::refused, "link is bound to another consumer");
  return {true, errc::ok, {}};
}

std::optional<GrantDecision> check_live_session(const Grant& grant, TimePoint now) {
  if (grant.revoked) return refuse(errc::revoked, "link revoked by the provider");
  if (grant.expires && now >= *grant.expires)
    return refuse(errc::expired, "link expired at " + rfc3339(*grant.expires));
  return std::nullopt;
}

bool grant_allows_service(const Grant& grant, const std::string& service) {
  return grant.services.count(service) > 0;
}

}  // namespace runsnack
