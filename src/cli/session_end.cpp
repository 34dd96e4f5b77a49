#include "cli/session_end.hpp"

#include "session/goodbye.hpp"

namespace runsnack::cli {

namespace {

// What the provider's word means for the user, and what they can do next (report() escapes peer text).
std::string goodbye_text(const Goodbye& g) {
  const std::string ended = "the provider ended this session (";
  if (g.ended == kEndedKicked)
    return ended + "kicked); the link still works: run the command again, or ask the provider why";
  if (g.ended == kEndedRevoked) return ended + "link revoked); ask the provider for a new link";
  if (g.ended == kEndedExpired) return ended + "link expired); ask the provider for a new link";
  if (g.ended == kEndedDeleted) return ended + "link deleted); ask the provider for a new link";
  if (g.ended == kEndedProviderStopped)
    return ended + "it stopped sharing); run the command again once the provider shares again";
  return ended + g.ended + (g.message.empty() ? "" : ": " + g.message) + ")";  // a newer provider's word
}

}  // namespace

std::string session_end_text(Session& session) {
  if (const auto& g = session.goodbye()) return goodbye_text(*g);
  const auto why = session.mux().close_reason();
  // No goodbye: a lost path or a provider gone (killed, crashed), or an older provider, which ends
  // sessions without one (its stop, a revocation, an expiry).
  return "the session ended without a word from the provider" + (why ? " (" + why->what() + ")" : std::string()) +
         ": the network path or the provider went away (an older provider also ends a revoked or expired link so)";
}

Error explain_session_end(Session& session, Error error) {
  if (!session.mux().is_closed()) return error;
  return Error(errc::closed, session_end_text(session));
}

nlohmann::json session_end_json(Session& session) {
  if (const auto& g = session.goodbye())
    return {{"event", "session_ended"}, {"ended", g->ended}, {"message", g->message}};
  const auto why = session.mux().close_reason();
  return {{"event", "session_ended"}, {"ended", "lost"}, {"message", why ? why->what() : std::string("closed")}};
}

}  // namespace runsnack::cli
