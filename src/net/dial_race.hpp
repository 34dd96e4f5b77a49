#pragma once
// A race of connection attempts to one provider (docs/ARCHITECTURE.md section
// 5.3): direct dials, punched sockets and relayed sockets all end in a TLS
// handshake that must pin the expected PeerId; the first to get there wins,
// the rest are cancelled or dropped.
//
// Ownership: create() returns a shared_ptr that every attempt holds, so
// attempts may finish after the caller has its winner. The TLS context must
// outlive the race. One executor; not thread-safe.

#include "crypto/peer_id.hpp"
#include "link/endpoint.hpp"
#include "net/tls_stream.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>

#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runsnack {

struct DialResult {
  TlsStreamPtr stream;
  Endpoint endpoint;                 // the candidate that won
  std::chrono::microseconds elapsed;  // TCP + TLS
  std::string path = "direct";        // "direct", "punched" or "relayed" (net/dial_race.hpp)
};

class DialRace : public std::enable_shared_from_this<DialRace> {
 public:
  static std::shared_ptr<DialRace> create(boost::asio::any_io_executor ex, boost::asio::ssl::context& tls,
                                          PeerId expected);

  void dial(Endpoint endpoint, std::string path);  // TCP connect, then TLS
  void handshake(boost::asio::ip::tcp::socket socket, Endpoint remote, std::string path);  // TLS on a connected socket
  // An outside racer (e.g. the rendezvous) that may still call handshake():
  // the race is not over while one is held.
  void hold() { ++held_; }
  void release();
  void note_failure(std::string why);
  bool decided() const { return winner_.has_value() || taken_; }

  // Returns when a path has won (or the race was taken) or at `until`.
  boost::asio::awaitable<void> wait_decided(std::chrono::steady_clock::time_point until);

  // The winner, or the reason none won by `deadline`.
  boost::asio::awaitable<Result<DialResult>> wait(std::chrono::steady_clock::time_point deadline);
  void cancel_all();

  // Internal, for the attempt coroutines.
  void finish_attempt() { --running_, wake_.cancel(); }
  void offer(DialResult r);
  void record(std::string why, bool wrong_peer);
  boost::asio::ssl::context& tls() { return tls_; }
  const PeerId& expected() const { return expected_; }
  std::chrono::steady_clock::time_point started() const { return started_; }

 private:
  DialRace(boost::asio::any_io_executor ex, boost::asio::ssl::context& tls, PeerId expected);
  void wake_decided_waiters();
  boost::asio::any_io_executor ex_;
  boost::asio::ssl::context& tls_;
  PeerId expected_;
  boost::asio::steady_timer wake_;
  std::list<boost::asio::steady_timer*> decided_waiters_;  // woken when the race is decided
  std::list<boost::asio::cancellation_signal> cancel_;
  std::optional<DialResult> winner_;
  bool taken_ = false;
  std::vector<std::string> failures_;
  bool saw_wrong_peer_ = false;
  std::size_t running_ = 0;
  std::size_t held_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace runsnack
