#include "link/grant.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace runsnack {
namespace {
GrantDecision refuse(errc code, std::string reason) { return {false, code, std::move(reason)}; }
}  // namespace

GrantDecision check_grant(const Grant& grant, TimePoint now, std::int64_t live_sessions,
                          const std::string& consumer_peer) {
  if (grant.revoked) return refuse(errc::revoked, "link revoked by the provider");
  if (grant.expires && now >= *grant.expires)
    return refuse(errc::expired, "link expired at " + rfc3339(*grant.expires));
  if (grant.max_sessions && live_sessions >= *grant.max_sessions)
    return refuse(errc::exhausted,
                  "too many sessions on this link (" + std::to_string(*grant.max_sessions) + " allowed at once)");
  if (grant.bound_peer && *grant.bound_peer != consumer_peer)
    return refuse(errc::refused, "link is bound to another consumer");
  return {true, errc::ok, {}};
}

GrantDecision check_new_consumer(const Grant& grant) {
  if (uses_left(grant).value_or(1) > 0) return {true, errc::ok, {}};
  const std::string n = std::to_string(*grant.max_uses);
  const bool one = *grant.max_uses == 1;
  return refuse(errc::exhausted, "this link is for " + n + (one ? " consumer (one key)" : " consumers (" + n + " keys)") +
                                     " and " + (one ? "another has" : n + " others have") +
                                     " used it: ask the provider for a new link");
}

std::optional<std::int64_t> uses_left(const Grant& grant) {
  if (!grant.max_uses) return std::nullopt;
  return std::max<std::int64_t>(0, *grant.max_uses - grant.consumers);
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

Result<std::set<std::string>> parse_service_list(std::string_view list) {
  std::set<std::string> out{kServiceInfo};
  std::size_t start = 0;
  while (start <= list.size() && !list.empty()) {
    std::size_t comma = std::min(list.find(',', start), list.size());
    std::string name(list.substr(start, comma - start));
    bool known = false;
    for (const char* k : kKnownServices) known |= name == k;
    if (!known) {
      std::string names;
      for (const char* k : kKnownServices) names += (names.empty() ? "" : ", ") + std::string(k);
      return fail(errc::invalid_argument, "unknown service '" + name + "' (known: " + names + ")");
    }
    out.insert(name);
    start = comma + 1;
  }
  return out;
}

nlohmann::json grant_terms(const Grant& grant, TimePoint now) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  const char* state = "active";
  if (grant.revoked) state = "revoked";
  else if (grant.expires && now >= *grant.expires) state = "expired";
  else if (uses_left(grant) == 0) state = "full";
  return {
      {"id", grant.id},
      {"label", grant.label},
      {"created", rfc3339(grant.created)},
      {"expires", grant.expires ? nlohmann::json(rfc3339(*grant.expires)) : nlohmann::json(nullptr)},
      {"max_uses", opt(grant.max_uses)},
      {"uses", grant.consumers},
      {"uses_left", opt(uses_left(grant))},
      {"connections", grant.connections},
      {"max_sessions", opt(grant.max_sessions)},
      {"bandwidth_bytes_per_s", opt(grant.bandwidth_bytes_per_s)},
      {"services", grant.services},
      {"gpus", grant.gpus},
      {"bind_first", grant.bind_first},
      {"bound_peer", opt(grant.bound_peer)},
      {"revoked", grant.revoked},
      {"terms", grant.terms},
      {"state", state},
  };
}

}  // namespace runsnack
