#pragma once
// How a consumer command says that its session ended (issue 39). When the provider said why (its
// goodbye, session/goodbye.hpp), one line with what to do next:
//   the provider ended this session (kicked); the link still works: run the command again, or ask the provider why
//   the provider ended this session (link revoked); ask the provider for a new link
// and, for --json, {"event":"session_ended","ended":"kicked","message":"ended by `runsnack kick`"}.
// Without a goodbye the session ended some other way (the path, a provider gone without a word or
// older than the goodbye): said as before, and "ended":"lost".

#include "core/error.hpp"
#include "session/session.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace runsnack::cli {

// For report(), once the session is closed.
std::string session_end_text(Session& session);
// `error` while the session runs; once it has ended, session_end_text (a stream's error is then only
// the symptom).
Error explain_session_end(Session& session, Error error);
// The --json event.
nlohmann::json session_end_json(Session& session);

}  // namespace runsnack::cli
