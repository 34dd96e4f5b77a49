// CommandLink over a real Mux pair on loopback TCP: re-attaching by token,
// replay from the consumer's counts, refusals, and a closed stream ending it.
#include "services/exec/detached_commands.hpp"

#include "net/transport.hpp"
#include "net/yamux_session.hpp"
#include "fs/frame.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <array>
#include <functional>

namespace runsnack::exec {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

PeerId peer(std::uint8_t b) {
  std::array<std::uint8_t, 32> raw{};
  raw.fill(b);
  return PeerId::from_raw_public_key(raw);
}

awaitable<void> sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

void run_test(asio::io_context& io, std::function<awaitable<void>()> body) {
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> { co_await body(); done = true; },
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(20s);
  EXPECT_TRUE(done) << "test body did not finish in time";
}

// A consumer-side and a provider-side Mux over loopback TCP.
struct Pair {
  std::shared_ptr<Mux> consumer, provider;
  explicit Pair(asio::io_context& io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    tcp::socket a(io);
    a.connect(acceptor.local_endpoint());
    tcp::socket b = acceptor.accept();
    consumer = Mux::create(make_tcp_transport(std::move(a)), yamux::Role::client);
    provider = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server);
    asio::co_spawn(io, consumer->run(), asio::detached);
    asio::co_spawn(io, provider->run(), asio::detached);
  }
  // A stream opened by the consumer, and the provider's end of it.
  awaitable<std::pair<std::shared_ptr<MuxStream>, std::shared_ptr<MuxStream>>> streams() {
    auto c = co_await consumer->open_stream();
    EXPECT_TRUE(c);
    const bool ok5 = static_cast<bool>(co_await (*c)->write(asio::buffer("x", 1)));
    EXPECT_TRUE(ok5);  // the provider sees a stream once it carries bytes
    auto p = co_await provider->accept_stream();
    EXPECT_TRUE(p);
    std::uint8_t x = 0;
    const bool ok6 = static_cast<bool>(co_await (*p)->read_exact(asio::buffer(&x, 1)));
    EXPECT_TRUE(ok6);
    co_return std::pair{*c, *p};
  }
};

std::span<const std::uint8_t> bytes(const char* s) {
  return {reinterpret_cast<const std::uint8_t*>(s), std::strlen(s)};
}

awaitable<std::string> read_out(MuxStream& s, std::size_t n) {
  std::string got;
  while (got.size() < n) {
    auto f = co_await fs::read_frame(s);
    EXPECT_TRUE(f);
    if (!f) break;
    if (f->type == fs::FrameType::out) got.append(f->payload.begin(), f->payload.end());
  }
  co_return got;
}

TEST(CommandLink, ReattachReplaysFromTheConsumersCount) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto c1_p1 = co_await p.streams();
    auto c1 = c1_p1.first;
    auto p1 = c1_p1.second;
    auto link = CommandLink::create(p1, peer(1));
    EXPECT_FALSE(link->token().empty());
    std::vector<std::string> moved_to;  // the sessions the command's record moved to
    link->on_attach([&](const std::string& session) { moved_to.push_back(session); });
    const auto text1 = bytes("hello ");
    const bool ok7 = static_cast<bool>(co_await link->write_output(fs::FrameType::out, text1));
    EXPECT_TRUE(ok7);
    const std::string got1 = co_await read_out(*c1, 6);
    EXPECT_EQ(got1, std::string("hello "));
    const auto text2 = bytes("world");
    const bool ok8 = static_cast<bool>(co_await link->write_output(fs::FrameType::out, text2));
    EXPECT_TRUE(ok8);
    // The consumer got only "hello " and "wo" (say) before its session went; a new stream
    // attaches with out=8.
    auto c2_p2 = co_await p.streams();
    auto c2 = c2_p2.first;
    auto p2 = c2_p2.second;
    const nlohmann::json args = {{"mode", "attach"}, {"token", link->token()}, {"out", 8}, {"err", 0}};
    co_await CommandLink::serve_attach(p2, args, peer(1), "SESSION2");
    EXPECT_EQ(moved_to, std::vector<std::string>{"SESSION2"});
    auto attached = co_await fs::read_control(*c2);
    EXPECT_TRUE(attached);
    if (attached) {
      EXPECT_EQ((*attached)["type"], "attached");
      EXPECT_EQ((*attached)["lost_out"], 0);
    }
    const std::string got2 = co_await read_out(*c2, 3);
    EXPECT_EQ(got2, std::string("rld"));
    // Output goes to the new stream from now on; the old one was reset.
    const auto text3 = bytes("!");
    const bool ok9 = static_cast<bool>(co_await link->write_output(fs::FrameType::out, text3));
    EXPECT_TRUE(ok9);
    const std::string got3 = co_await read_out(*c2, 1);
    EXPECT_EQ(got3, std::string("!"));
    const nlohmann::json exit_message = {{"type", "exit"}, {"status", 0}};
    const bool ok10 = static_cast<bool>(co_await link->write_control(exit_message));
    EXPECT_TRUE(ok10);
    auto exit = co_await fs::read_control(*c2);
    EXPECT_TRUE(exit && (*exit)["type"] == "exit");
    co_await link->close_write();
    p.consumer->close();
  });
}

TEST(CommandLink, AnotherConsumerOrABadTokenIsRefused) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto c1_p1 = co_await p.streams();
    auto c1 = c1_p1.first;
    auto p1 = c1_p1.second;
    auto link = CommandLink::create(p1, peer(1));
    const std::vector<std::pair<std::string, PeerId>> tries = {
        {link->token(), peer(2)}, {"AAAA", peer(1)}, {"", peer(1)}};
    for (const auto& [token, who] : tries) {
      auto c2_p2 = co_await p.streams();
    auto c2 = c2_p2.first;
    auto p2 = c2_p2.second;
      const nlohmann::json args = {{"mode", "attach"}, {"token", token}, {"out", 0}};
      co_await CommandLink::serve_attach(p2, args, who);
      auto reply = co_await fs::read_control(*c2);  // an "error" frame reads as a refusal
      EXPECT_FALSE(reply);
      if (!reply) {
        EXPECT_NE(reply.error().what().find("is gone"), std::string::npos);
      }
    }
    // The command's own stream is untouched.
    const auto text4 = bytes("still here");
    const bool ok11 = static_cast<bool>(co_await link->write_output(fs::FrameType::out, text4));
    EXPECT_TRUE(ok11);
    const std::string got4 = co_await read_out(*c1, 10);
    EXPECT_EQ(got4, std::string("still here"));
    p.consumer->close();
  });
}

TEST(CommandLink, AClosedStreamIsGoneAtOnce) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto c1_p1 = co_await p.streams();
    auto c1 = c1_p1.first;
    auto p1 = c1_p1.second;
    auto link = CommandLink::create(p1, peer(1));
    c1->reset();  // the consumer went away on purpose: no waiting for a re-attach
    co_await sleep(50ms);
    const auto started = std::chrono::steady_clock::now();
    const auto text5 = bytes("nobody reads this");
    const bool ok12 = static_cast<bool>(co_await link->write_output(fs::FrameType::out, text5));
    EXPECT_FALSE(ok12);
    const bool ok13 = static_cast<bool>(co_await link->read_control());
    EXPECT_FALSE(ok13);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
    // And its token no longer attaches.
    auto c2_p2 = co_await p.streams();
    auto c2 = c2_p2.first;
    auto p2 = c2_p2.second;
    const nlohmann::json args = {{"token", link->token()}};
    co_await CommandLink::serve_attach(p2, args, peer(1));
    const bool ok14 = static_cast<bool>(co_await fs::read_control(*c2));
    EXPECT_FALSE(ok14);
    p.consumer->close();
  });
}

TEST(CommandLink, TheBoundsLeaveFurtherCommandsWithoutAToken) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    std::vector<std::shared_ptr<CommandLink>> links;
    for (std::size_t i = 0; i < kMaxPerConsumer + 2; ++i) {
      auto c_s = co_await p.streams();
    auto c = c_s.first;
    auto s = c_s.second;
      links.push_back(CommandLink::create(s, peer(3)));
    }
    std::size_t with_token = 0;
    for (const auto& l : links) with_token += !l->token().empty();
    EXPECT_EQ(with_token, kMaxPerConsumer);
    links.clear();  // their slots are free again
    auto c_s = co_await p.streams();
    auto c = c_s.first;
    auto s = c_s.second;
    EXPECT_FALSE(CommandLink::create(s, peer(3))->token().empty());
    p.consumer->close();
  });
}

}  // namespace
}  // namespace runsnack::exec
