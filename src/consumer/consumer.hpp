#pragma once
// The consumer role: turns a link into an authenticated Session. Dials every
// candidate at once (net/dial_race.hpp), pins the provider's PeerId in the TLS
// handshake, proves the grant secret over the channel, and starts the mux.

#include "crypto/identity.hpp"
#include "link/link.hpp"
#include "session/session.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace runsnack {

struct ConnectOptions {
  std::chrono::milliseconds timeout{10000};  // whole setup: dial, TLS, proof
  // Asked once the TLS handshake is done, before the grant proof: false ends the attempt
  // there, so that one of several racing attempts (consumer/reconnect.hpp) that is no longer
  // wanted does not count as a use of the link. Empty: always wanted.
  std::function<bool()> still_wanted;
  // Return as soon as the proof is sent: the command's first requests follow it in the same
  // round trip, and a refusal comes back as the answer to its first stream
  // (Session::answer). Otherwise connect() returns once the provider accepted.
  bool pipelined_proof = false;
  // The command that serves the link, named when it cannot be reached ("is `runsnack share`
  // still running, and reachable from here?"): `runsnack pool serve` for a pool's links. A
  // string literal: ConnectOptions is a coroutine's parameter, often a default-argument
  // temporary, which GCC 12 copies bitwise (a std::string here was freed twice).
  const char* served_by = "runsnack share";
};

class Consumer {
 public:
  // The TLS context presents `identity`; the Consumer must outlive its sessions' setup.
  static Result<std::unique_ptr<Consumer>> create(const Identity& identity);

  // The returned session's mux is already running on the current executor;
  // destroying the Session closes it.
  boost::asio::awaitable<Result<std::unique_ptr<Session>>> connect(const Link& link, ConnectOptions options = {});

 private:
  explicit Consumer(boost::asio::ssl::context tls) : tls_(std::move(tls)) {}
  boost::asio::ssl::context tls_;
};

}  // namespace runsnack
