#pragma once
// The provider's answer to the grant proof, read by the multiplexer's own
// reader, so that a consumer's first requests travel right behind its proof
// instead of a round trip later (docs/ARCHITECTURE.md section 3, "pipelined
// proof"). The provider is unchanged: it reads the proof, answers, and only
// then starts its multiplexer, which finds the consumer's frames already
// waiting; on a refusal it closes without reading them.
//
// `answer_first()` wraps the consumer's transport: its first read takes the
// answer (one length-prefixed message, session/message.hpp) off the front of
// the byte stream and settles the PendingAuth; later reads pass through. A
// refusal, a malformed answer or the end of the connection settles it with an
// error and fails the read, which ends the multiplexer. Not thread-safe: the
// session's executor only.

#include "core/error.hpp"
#include "net/transport.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <optional>
#include <string>

namespace runsnack {

class PendingAuth {
 public:
  explicit PendingAuth(const boost::asio::any_io_executor& ex);
  // The session id, or why the provider refused (or the answer never came).
  void settle(Result<std::string> result);
  bool settled() const { return result_.has_value(); }
  const Result<std::string>& result() const { return *result_; }  // once settled
  boost::asio::awaitable<Result<std::string>> wait();

 private:
  std::optional<Result<std::string>> result_;
  boost::asio::steady_timer signal_;  // cancelled once settled
};

std::unique_ptr<Transport> answer_first(std::unique_ptr<Transport> inner, std::shared_ptr<PendingAuth> auth);

}  // namespace runsnack
