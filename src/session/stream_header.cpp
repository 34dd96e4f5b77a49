#include "session/stream_header.hpp"

#include "session/auth.hpp"
#include "session/message.hpp"

namespace runsnack {

nlohmann::json to_json(const StreamHeader& h) { return {{"service", h.service}, {"args", h.args}}; }

Result<StreamHeader> parse_stream_header(const nlohmann::json& j) {
  auto service = get_string(j, "service", 32);
  if (!service) return service.error();
  if (service->empty()) return fail(errc::malformed, "empty service name");
  for (char c : *service)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return fail(errc::malformed, "bad character in service name");
  StreamHeader h;
  h.service = std::move(*service);
  if (auto it = j.find("args"); it != j.end()) {
    if (!it->is_object()) return fail(errc::malformed, "stream args must be an object");
    h.args = *it;
  }
  return h;
}

nlohmann::json to_json(const StreamReply& r) {
  if (r.ok) return {{"ok", true}};
  return {{"ok", false}, {"code", errc_name(r.code)}, {"reason", r.reason}};
}

Result<StreamReply> parse_stream_reply(const nlohmann::json& j) {
  auto ok = get_bool(j, "ok");
  if (!ok) return ok.error();
  StreamReply r;
  r.ok = *ok;
  if (r.ok) return r;
  auto code = get_string(j, "code", 64);
  if (!code) return code.error();
  auto reason = get_string(j, "reason", 512);
  if (!reason) return reason.error();
  r.code = errc_from_name(*code);
  r.reason = std::move(*reason);
  return r;
}

}  // namespace runsnack
