#pragma once
// The provider's goodbye: why it ends a session, said inside the session before it closes it, so
// that a consumer can tell an end the provider meant (kicked, link revoked, expired or deleted,
// sharing stopped) from a fault (the path lost, a provider gone without a word), which it may
// outlive by reconnecting. Inside the TLS session the link pins, so nobody else can say it.
//
// A consumer that reads goodbyes says so in its grant proof ("goodbye":true, session/auth.hpp);
// only to such a consumer the provider, when it ends the session, opens a stream (the only one a
// provider ever opens) whose StreamHeader (session/stream_header.hpp) is the goodbye:
//
//   provider -> {"service":"goodbye","args":{"ended":"kicked","message":"ended by `runsnack kick`"}}
//   consumer -> {"ok":true}     it has the reason: the acknowledgment
//   provider:   closes the session (yamux GoAway, TLS close_notify) once acknowledged, or after
//               kGoodbyeWait (session/goodbye_exchange.hpp)
//
//   "ended"    kicked | revoked | expired | deleted | provider_stopped; [a-z_]{1,32}: a newer
//              provider's word is kept as it is
//   "message"  the provider's reason in words, one line, at most kMaxGoodbyeMessage bytes (peer text:
//              shown escaped)
//
// An older consumer never asks for it and sees the session close as before; an older provider
// never sends it, and its consumers' sessions end without one (as a fault would).

#include "core/error.hpp"
#include "session/stream_header.hpp"

#include <cstddef>
#include <string>

namespace runsnack {

inline constexpr const char* kServiceGoodbye = "goodbye";

// Why the provider ended the session ("ended").
inline constexpr const char* kEndedKicked = "kicked";                     // `runsnack kick`: the link still works
inline constexpr const char* kEndedRevoked = "revoked";                   // `runsnack revoke`
inline constexpr const char* kEndedExpired = "expired";                   // the link's --expires passed
inline constexpr const char* kEndedDeleted = "deleted";                   // the link's row is gone
inline constexpr const char* kEndedProviderStopped = "provider_stopped";  // `share` got Ctrl-C or SIGTERM

inline constexpr std::size_t kMaxGoodbyeMessage = 512;

struct Goodbye {
  std::string ended;    // one of kEnded*, or a newer provider's word
  std::string message;  // the provider's words
};

StreamHeader goodbye_header(const Goodbye& goodbye);
// The goodbye a stream's header carries; errc::malformed when it is not one (another service, a
// missing or bad field).
Result<Goodbye> parse_goodbye(const StreamHeader& header);

}  // namespace runsnack
