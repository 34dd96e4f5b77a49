#pragma once
// Reading and writing rendezvous messages (rdv_codec.hpp) on a TCP socket,
// each with a deadline. Reads exactly one frame and nothing after it, so a
// relay connection can hand the socket on right after `relay_ok`.

#include "signaling/rdv_codec.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>

namespace runsnack::rdv {

boost::asio::awaitable<Result<Message>> read_message(boost::asio::ip::tcp::socket& socket,
                                                     std::chrono::milliseconds timeout);
boost::asio::awaitable<Result<void>> write_message(boost::asio::ip::tcp::socket& socket, const Message& message,
                                                   std::chrono::milliseconds timeout);
// A pre-encoded frame (encode()).
boost::asio::awaitable<Result<void>> write_frame(boost::asio::ip::tcp::socket& socket, const std::string& frame,
                                                 std::chrono::milliseconds timeout);

}  // namespace runsnack::rdv
