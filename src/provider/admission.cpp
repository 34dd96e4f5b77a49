#include "provider/admission.hpp"

#include "session/handshake.hpp"

#include <spdlog/spdlog.h>

namespace runsnack {

Admission Admitter::refuse(const AdmissionRequest& request, errc code, const std::string& reason, bool proven) {
  AuditEvent ev;
  ev.time = clock_.now();
  ev.kind = "auth";
  ev.grant_id = request.hello.grant_id;
  ev.peer = request.consumer.str();
  ev.address = request.address;
  ev.decision = "refuse";
  ev.reason = reason;
  if (!proven && unproven_) unproven_(ev);
  else if (auto r = audit_.append(ev); !r) spdlog::error("audit log: {}", r.error().what());
  Admission out;
  out.reply = AuthReply{false, code, reason, ""};
  out.unproven = !proven;
  return out;
}

Admission Admitter::admit(const AdmissionRequest& request, const std::string& new_session_id) {
  auto found = grants_.find(request.hello.grant_id);
  if (!found) return refuse(request, errc::internal, "provider database error");
  if (!*found)
    return refuse(request, errc::not_found, "unknown link (it may have been deleted): ask for a new one", false);
  const Grant& grant = **found;
  if (!proof_is_valid(grant, request.hello, request.channel_binding))
    return refuse(request, errc::auth_failed, "wrong secret: the link is damaged or not this provider's", false);

  const LiveSessionCounts live = live_sessions_(grant.id);
  if (live.total >= limits_.total)
    return refuse(request, errc::exhausted,
                  "the provider is serving its limit of " + std::to_string(limits_.total) +
                      " sessions at once: try again when one ends");
  if (live.from_address >= limits_.per_address)
    return refuse(request, errc::exhausted,
                  "your address already has " + std::to_string(live.from_address) +
                      " sessions open with this provider, its limit: end one (or try again later)");
  auto decision = check_grant(grant, clock_.now(), live.on_grant, request.consumer.str());
  if (!decision.accepted) return refuse(request, decision.code, decision.reason);

  auto counted = grants_.record_use(grant.id, request.consumer.str(), clock_.now());
  if (!counted) return refuse(request, errc::internal, "provider database error");
  if (!*counted) {
    // Full for a new consumer (the store knows who is new), or a race lost to
    // another connection or a `runsnack revoke`: re-read for the reason.
    auto again = grants_.find(grant.id);
    if (again && *again) {
      auto d = check_grant(**again, clock_.now(), 0, request.consumer.str());
      if (!d.accepted) return refuse(request, d.code, d.reason);
      d = check_new_consumer(**again);
      if (!d.accepted) return refuse(request, d.code, d.reason);
    }
    return refuse(request, errc::exhausted, "link no longer usable");
  }
  auto updated = grants_.find(grant.id);
  Admission out;
  out.grant = (updated && *updated) ? **updated : grant;

  AuditEvent ev;
  ev.time = clock_.now();
  ev.kind = "auth";
  ev.grant_id = grant.id;
  ev.peer = request.consumer.str();
  ev.address = request.address;
  ev.decision = "accept";
  ev.detail = {{"session", new_session_id}, {"consumers", out.grant->consumers}, {"connections", out.grant->connections}};
  if (auto r = audit_.append(ev); !r) spdlog::error("audit log: {}", r.error().what());
  out.reply = AuthReply{true, errc::ok, "", new_session_id};
  return out;
}

}  // namespace runsnack
