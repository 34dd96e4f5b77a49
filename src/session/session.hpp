#pragma once
// One authenticated peer connection: TLS + yamux + grant (docs/ARCHITECTURE.md
// section 2). Streams are opened and accepted by service name; the first
// message on each stream is a StreamHeader (session/stream_header.hpp).
//
// Ownership: a Session owns its Mux (shared with stream handlers so that a
// handler may outlive the accept loop safely). Everything runs on the
// connection's executor; not thread-safe.

#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "link/link.hpp"
#include "net/mux_stream.hpp"
#include "net/yamux_session.hpp"
#include "session/goodbye_exchange.hpp"
#include "session/pending_auth.hpp"
#include "session/stream_header.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace runsnack {

// How the two peers reached each other; the foundation only dials directly.
inline constexpr const char* kPathDirect = "direct";

struct SessionInfo {
  std::string session_id;
  PeerId peer;               // the other side's identity
  std::string grant_id;
  std::string path = kPathDirect;
  std::string remote_address;  // host:port of the other side
  // TCP + TLS + grant proof (with ConnectOptions::pipelined_proof: its sending, not its answer)
  std::chrono::microseconds setup{0};
};

class Session {
 public:
  // `auth`: the provider's answer to the grant proof, which may still be on
  // its way (session/pending_auth.hpp); every stream's answer waits for it.
  // `heard`: filled by hear_goodbye on this session's mux (consumer/consumer.cpp).
  Session(std::shared_ptr<Mux> mux, SessionInfo info, std::shared_ptr<PendingAuth> auth,
          std::shared_ptr<HeardGoodbye> heard)
      : mux_(std::move(mux)), info_(std::move(info)), auth_(std::move(auth)), heard_(std::move(heard)) {}
  // The consumer's command is over (its last answer is in): no round trip
  // waiting for the provider's close_notify.
  ~Session() { mux_->close(PeerWait::none); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Opens a stream to `header.service` and waits for the provider's answer.
  // A refusal comes back as an error with the provider's reason.
  boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> open(const StreamHeader& header);
  // Opens a stream to `header.service` without waiting: what the caller writes
  // next travels with the header, a round trip sooner. The caller then reads
  // the answer with `answer()` before anything else from the stream (a refusal
  // discards what it wrote).
  boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_pipelined(const StreamHeader& header);
  boost::asio::awaitable<Result<void>> answer(MuxStream& stream, const std::string& service);
  // answer(), then the service's own first reply, a StreamReply (forward's target connected, cuda's
  // server started): errc::refused with the provider's reason when that one says no.
  boost::asio::awaitable<Result<void>> answers(MuxStream& stream, const std::string& service);
  // The provider accepted the grant proof (fills info().session_id), or why not.
  boost::asio::awaitable<Result<void>> authenticated();

  // Why the provider ended this session, when it said so (its goodbye, session/goodbye.hpp): set
  // before the provider closes the session (it waits for our answer, up to kGoodbyeWait), so it
  // is there once mux().is_closed() says the session ended. Empty while the session runs, and
  // after an end nobody announced: a fault (the path lost, a provider gone without a word, or
  // one older than the goodbye), which a consumer may outlive by reconnecting.
  const std::optional<Goodbye>& goodbye() const { return heard_->goodbye; }

  Mux& mux() { return *mux_; }
  const std::shared_ptr<Mux>& shared_mux() const { return mux_; }
  const SessionInfo& info() const { return info_; }
  void set_setup(std::chrono::microseconds setup) { info_.setup = setup; }

 private:
  std::shared_ptr<Mux> mux_;
  SessionInfo info_;
  std::shared_ptr<PendingAuth> auth_;
  std::shared_ptr<HeardGoodbye> heard_;
};

// Length-prefixed JSON over a stream (session/message.hpp).
boost::asio::awaitable<Result<nlohmann::json>> read_stream_message(MuxStream& stream,
                                                                   std::uint32_t max_bytes = 64 * 1024);
boost::asio::awaitable<Result<void>> write_stream_message(MuxStream& stream, const nlohmann::json& body);

}  // namespace runsnack
