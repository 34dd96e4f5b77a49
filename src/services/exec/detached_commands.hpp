#pragma once
// Run commands that outlive a lost session, so that the consumer can re-attach
// from a new one (cli/cmd_run.cpp does when its session drops).
//
// A command talks to its consumer through a CommandLink instead of straight
// through its stream. When the stream fails because the session went silent
// (keepalive or write timeout: an outage longer than a session survives, a
// changed address), the link detaches: the command keeps running (its output
// waits in the pipe) and for kReattachWithin a new stream of the same consumer
// may take over:
//
//   run {"mode":"attach","token":T,"out":N,"err":M}   N, M: bytes of stdout and
//                                                     stderr the consumer has
//   provider -> {"type":"attached","lost_out":A,"lost_err":B}, then the output
//               from N and M on (what it still holds: the last kReplayBytes of
//               each; A and B say how much of what the consumer missed is gone),
//               then as a run exec stream: out/err frames, {"type":"exit",...}
//   or {"type":"error","message":...} when there is no such command (ended and
//   not waited for, never kept, another consumer's).
//
// A session that ended because the consumer closed it (its process ended,
// Ctrl-C) ends the command at once, as before. Nobody in time: killed too.
//
// Bounds: kMaxPerConsumer re-attachable commands per consumer and kMaxInTotal
// in all (further ones run as before, without re-attach), each holding at most
// kReplayBytes of each output. Tokens are 128-bit random; only the consumer
// that started the command may use one. One thread: the provider's io_context.

#include "crypto/peer_id.hpp"
#include "net/mux_stream.hpp"
#include "fs/transfer.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace runsnack::exec {

inline constexpr std::chrono::seconds kReattachWithin{120};
inline constexpr std::size_t kReplayBytes = 512 * 1024;
inline constexpr std::size_t kMaxPerConsumer = 8;
inline constexpr std::size_t kMaxInTotal = 64;

class CommandLink : public std::enable_shared_from_this<CommandLink> {
 public:
  // A link for a command of `consumer` over `stream`; re-attachable (it has a
  // token()) when the bounds allow, else it behaves as the bare stream did.
  static std::shared_ptr<CommandLink> create(std::shared_ptr<MuxStream> stream, const PeerId& consumer);
  ~CommandLink();
  CommandLink(const CommandLink&) = delete;
  CommandLink& operator=(const CommandLink&) = delete;

  // Empty when the command cannot be re-attached.
  const std::string& token() const { return token_; }

  // Output of the command: false once the consumer is gone for good.
  boost::asio::awaitable<bool> write_output(fs::FrameType type, std::span<const std::uint8_t> bytes);
  // A control message after the output so far ("started", "exit"): false once gone for good.
  boost::asio::awaitable<bool> write_control(const nlohmann::json& message);
  // The consumer's next frame (control or stdin); empty once it is gone for good.
  boost::asio::awaitable<std::optional<fs::Frame>> read_frame();
  // The consumer's next control message; empty once it is gone for good.
  boost::asio::awaitable<std::optional<nlohmann::json>> read_control();
  // The end: half-closes the current stream; the token is no longer valid.
  boost::asio::awaitable<void> close_write();

  // Serves {"mode":"attach"} on `stream` for `consumer` (see above), from session `session_id`.
  static boost::asio::awaitable<void> serve_attach(std::shared_ptr<MuxStream> stream, const nlohmann::json& args,
                                                   const PeerId& consumer, const std::string& session_id = {});
  // Told the session of each re-attach (the command's record moves there: command_record.hpp;
  // stdin ends there: stdin_relay.hpp). Each call adds one.
  void on_attach(std::function<void(const std::string& session_id)> fn) { on_attach_.push_back(std::move(fn)); }

 private:
  CommandLink(std::shared_ptr<MuxStream> stream, PeerId consumer, std::string token);
  // Sends what the current stream has not had yet, one flusher at a time.
  boost::asio::awaitable<bool> flush();
  // The stream of `generation` failed with `why`: waits for a re-attach when
  // that may come; false when the consumer is gone for good.
  boost::asio::awaitable<bool> recover(std::uint64_t generation, const Error& why);
  void take_over(std::shared_ptr<MuxStream> stream, std::uint64_t out, std::uint64_t err, std::uint64_t& lost_out,
                 std::uint64_t& lost_err);

  struct Channel {
    std::string held;          // the last bytes written (at most kReplayBytes when re-attachable)
    std::uint64_t written = 0; // bytes of output so far
    std::uint64_t sent = 0;    // of them, handed to the current stream
  };
  std::shared_ptr<MuxStream> stream_;
  PeerId consumer_;
  std::string token_;
  std::uint64_t generation_ = 0;  // bumped by each take-over
  Channel channels_[2];           // out, err
  bool flushing_ = false;   // a coroutine is writing (output, or a control message): one write at a time
  bool attaching_ = false;  // a new stream is taking over: nothing goes out before its "attached"
  bool detached_ = false;
  bool gone_ = false;
  bool closed_ = false;
  std::vector<std::function<void(const std::string&)>> on_attach_;
};

}  // namespace runsnack::exec
