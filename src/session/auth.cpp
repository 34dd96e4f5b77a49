#include "session/auth.hpp"

#include "core/base32.hpp"
#include "core/json_fields.hpp"
#include "session/message.hpp"

#include <algorithm>
#include <utility>

namespace runsnack {
namespace {

constexpr std::pair<errc, const char*> kNames[] = {
    {errc::ok, "ok"},
    {errc::invalid_argument, "invalid_argument"},
    {errc::malformed, "malformed"},
    {errc::too_large, "too_large"},
    {errc::not_found, "not_found"},
    {errc::expired, "expired"},
    {errc::revoked, "revoked"},
    {errc::exhausted, "exhausted"},
    {errc::refused, "refused"},
    {errc::auth_failed, "auth_failed"},
    {errc::peer_mismatch, "peer_mismatch"},
    {errc::io_error, "io_error"},
    {errc::timeout, "timeout"},
    {errc::closed, "closed"},
    {errc::unsupported, "unsupported"},
    {errc::internal, "internal"},
};

}  // namespace

const char* errc_name(errc e) {
  for (const auto& [code, name] : kNames)
    if (code == e) return name;
  return "refused";
}

errc errc_from_name(std::string_view name) {
  for (const auto& [code, n] : kNames)
    if (name == n) return code;
  return errc::refused;
}

nlohmann::json to_json(const AuthHello& hello) {
  nlohmann::json j = {{"v", kAuthVersion}, {"grant", hello.grant_id}, {"proof", base32::encode(hello.proof)}};
  if (hello.hears_goodbye) j["goodbye"] = true;
  return j;
}

Result<AuthHello> parse_auth_hello(const nlohmann::json& j) {
  auto version = get_int(j, "v");
  if (!version) return version.error();
  if (*version != kAuthVersion)
    return fail(errc::unsupported, "auth version " + std::to_string(*version) + " is not supported");
  auto grant = get_string(j, "grant", 64);
  if (!grant) return grant.error();
  auto proof_text = get_string(j, "proof", 64);
  if (!proof_text) return proof_text.error();
  auto proof = base32::decode(*proof_text);
  if (!proof || proof->size() != 32) return fail(errc::malformed, "auth proof must be 32 bytes in base32");
  AuthHello hello;
  hello.grant_id = std::move(*grant);
  std::copy(proof->begin(), proof->end(), hello.proof.begin());
  hello.hears_goodbye = bool_or(j, "goodbye", false);
  return hello;
}

nlohmann::json to_json(const AuthReply& reply) {
  if (reply.ok) return {{"ok", true}, {"session", reply.session_id}};
  return {{"ok", false}, {"code", errc_name(reply.code)}, {"reason", reply.reason}};
}

Result<AuthReply> parse_auth_reply(const nlohmann::json& j) {
  auto ok = get_bool(j, "ok");
  if (!ok) return ok.error();
  AuthReply reply;
  reply.ok = *ok;
  if (reply.ok) {
    auto session = get_string(j, "session", 64);
    if (!session) return session.error();
    reply.session_id = std::move(*session);
    return reply;
  }
  auto code = get_string(j, "code", 64);
  if (!code) return code.error();
  auto reason = get_string(j, "reason", 512);
  if (!reason) return reason.error();
  reply.code = errc_from_name(*code);
  reply.reason = std::move(*reason);
  return reply;
}

}  // namespace runsnack
