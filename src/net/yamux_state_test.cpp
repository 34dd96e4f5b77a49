// The yamux state machine stepped by hand: no sockets, no clock.
#include "net/yamux_state.hpp"

#include <gtest/gtest.h>

namespace runsnack::yamux {
namespace {

using std::chrono::milliseconds;
constexpr std::uint32_t kWindow = 256 * 1024;

FrameHeader wu(std::uint32_t id, std::uint16_t flags, std::uint32_t delta = 0) {
  return {FrameType::window_update, flags, id, delta};
}
FrameHeader data(std::uint32_t id, std::uint32_t len, std::uint16_t flags = 0) {
  return {FrameType::data, flags, id, len};
}

struct YamuxState : ::testing::Test {
  MuxLimits limits;
  SteadyTime t0{};
  std::vector<FrameHeader> out;
};

TEST_F(YamuxState, ClientOpensOddStreamsWithSyn) {
  MuxState c(Role::client, limits);
  auto a = c.open(out);
  auto b = c.open(out);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, 1u);
  EXPECT_EQ(*b, 3u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], wu(1, flag::syn));
  MuxState s(Role::server, limits);
  EXPECT_EQ(*s.open(out), 2u);
}

TEST_F(YamuxState, IncomingSynAcceptedThenAcked) {
  MuxState s(Role::server, limits);
  auto in = s.on_frame(wu(1, flag::syn), t0, out);
  EXPECT_TRUE(in.opened);
  EXPECT_TRUE(out.empty());
  s.accepted(1, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], wu(1, flag::ack));
}

TEST_F(YamuxState, SynWithOurParityOrDuplicateIsProtocolError) {
  MuxState s(Role::server, limits);
  auto bad = s.on_frame(wu(2, flag::syn), t0, out);
  ASSERT_TRUE(bad.fault);
  EXPECT_EQ(bad.fault->code, GoAwayCode::protocol_error);
  EXPECT_EQ(out.back(), (FrameHeader{FrameType::go_away, 0, 0, 1}));
  MuxState s2(Role::server, limits);
  s2.on_frame(wu(1, flag::syn), t0, out);
  EXPECT_TRUE(s2.on_frame(wu(1, flag::syn), t0, out).fault);
  EXPECT_TRUE(s2.on_frame(data(0, 1), t0, out).fault);
}

TEST_F(YamuxState, BacklogAndStreamLimitsRefuseWithRst) {
  limits.accept_backlog = 2;
  MuxState s(Role::server, limits);
  EXPECT_TRUE(s.on_frame(wu(1, flag::syn), t0, out).opened);
  EXPECT_TRUE(s.on_frame(wu(3, flag::syn), t0, out).opened);
  auto third = s.on_frame(data(5, 10, flag::syn), t0, out);
  EXPECT_FALSE(third.opened);
  EXPECT_EQ(third.discard, 10u);
  EXPECT_EQ(out.back(), wu(5, flag::rst));
  s.accepted(1, out);
  EXPECT_TRUE(s.on_frame(wu(7, flag::syn), t0, out).opened);

  limits.max_streams = 1;
  MuxState c(Role::client, limits);
  ASSERT_TRUE(c.open(out));
  auto r = c.open(out);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::exhausted));
}

TEST_F(YamuxState, SendWindowLimitsDataAndGrowsWithUpdates) {
  MuxState c(Role::client, limits);
  auto id = *c.open(out);
  auto h = c.next_data(id, 10 * kWindow);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->length, kWindow);  // one window, one max-size frame
  EXPECT_EQ(h->flags, 0);
  EXPECT_EQ(c.next_data(id, 1)->length, 0u);  // blocked
  auto in = c.on_frame(wu(id, flag::ack, 1000), t0, out);
  EXPECT_TRUE(in.send_window_grew);
  // 1000 bytes of window for 5000 to send: wait for more (silly-window avoidance) ...
  EXPECT_EQ(c.next_data(id, 5000)->length, 0u);
  // ... unless the rest fits.
  EXPECT_EQ(c.next_data(id, 1000)->length, 1000u);
  c.on_frame(wu(id, 0, 1), t0, out);
  // Overflowing the 32-bit window is a protocol error.
  EXPECT_TRUE(c.on_frame(wu(id, 0, 0xffffffff), t0, out).fault);
}

TEST_F(YamuxState, PeerExceedingOurWindowIsProtocolError) {
  MuxState s(Role::server, limits);
  s.on_frame(wu(1, flag::syn), t0, out);
  auto ok = s.on_frame(data(1, kWindow), t0, out);
  EXPECT_EQ(ok.deliver, kWindow);
  auto bad = s.on_frame(data(1, 1), t0, out);
  ASSERT_TRUE(bad.fault);
  EXPECT_EQ(bad.fault->code, GoAwayCode::protocol_error);
}

TEST_F(YamuxState, WindowUpdateOnlyAfterHalfConsumed) {
  limits.max_window = kWindow;  // no growth
  MuxState s(Role::server, limits);
  s.on_frame(wu(1, flag::syn), t0, out);
  s.accepted(1, out);
  out.clear();
  s.on_frame(data(1, kWindow), t0, out);
  EXPECT_FALSE(s.consumed(1, 1000, t0));
  EXPECT_FALSE(s.consumed(1, kWindow / 2 - 1001, t0));
  auto u = s.consumed(1, 1, t0);
  ASSERT_TRUE(u);
  EXPECT_EQ(*u, wu(1, 0, kWindow / 2));
  // The peer may now send exactly half a window more.
  EXPECT_EQ(s.on_frame(data(1, kWindow / 2), t0, out).deliver, kWindow / 2);
  EXPECT_TRUE(s.on_frame(data(1, 1), t0, out).fault);
}

TEST_F(YamuxState, WindowDoublesWhenConsumedFastButNotWhenSlow) {
  MuxState s(Role::server, limits);  // min_tuning_rtt 1 ms
  s.on_frame(wu(1, flag::syn), t0, out);
  s.on_frame(data(1, kWindow), t0, out);
  // Half a window within ~2 RTTs: window doubles, delta = consumed + growth.
  auto fast = s.consumed(1, kWindow / 2, t0 + std::chrono::microseconds(500));
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->length, kWindow / 2 + kWindow);
  EXPECT_EQ(s.recv_window_size(1), 2 * kWindow);
  // Now slowly: the window stays.
  s.on_frame(data(1, kWindow), t0, out);
  auto slow = s.consumed(1, kWindow, t0 + milliseconds(500));
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->length, kWindow);
  EXPECT_EQ(s.recv_window_size(1), 2 * kWindow);
}

TEST_F(YamuxState, WindowNeverExceedsMax) {
  limits.max_window = 1024 * 1024;
  MuxState s(Role::server, limits);
  s.on_frame(wu(1, flag::syn), t0, out);
  for (int i = 0; i < 20; ++i) {
    std::uint32_t w = s.recv_window_size(1);
    ASSERT_EQ(s.on_frame(data(1, w), t0, out).deliver, w);  // peer may send exactly what we grant
    s.consumed(1, w, t0);
  }
  EXPECT_EQ(s.recv_window_size(1), limits.max_window);
}

TEST_F(YamuxState, HalfCloseBothWaysForgetsTheStream) {
  MuxState c(Role::client, limits);
  auto id = *c.open(out);
  auto fin = c.close_write(id);
  ASSERT_TRUE(fin);
  EXPECT_EQ(*fin, wu(id, flag::fin));
  EXPECT_FALSE(c.next_data(id, 1));  // no data after our FIN
  EXPECT_FALSE(c.close_write(id));
  EXPECT_EQ(c.on_frame(data(id, 3), t0, out).deliver, 3u);  // the peer still sends
  auto in = c.on_frame(data(id, 0, flag::fin), t0, out);
  EXPECT_TRUE(in.remote_fin);
  EXPECT_FALSE(c.has_stream(id));
  EXPECT_EQ(c.stream_count(), 0u);
}

TEST_F(YamuxState, DataAfterPeerFinResetsStreamOnly) {
  MuxState c(Role::client, limits);
  auto id = *c.open(out);
  c.on_frame(data(id, 0, flag::fin), t0, out);
  auto in = c.on_frame(data(id, 5), t0, out);
  EXPECT_FALSE(in.fault);
  EXPECT_TRUE(in.reset);
  EXPECT_EQ(in.discard, 5u);
  EXPECT_EQ(out.back(), wu(id, flag::rst));
}

TEST_F(YamuxState, RstFromPeerAndLocalReset) {
  MuxState c(Role::client, limits);
  auto id = *c.open(out);
  auto in = c.on_frame(wu(id, flag::rst), t0, out);
  EXPECT_TRUE(in.reset);
  EXPECT_FALSE(c.has_stream(id));
  // Late frames for it are discarded, not errors.
  auto late = c.on_frame(data(id, 100), t0, out);
  EXPECT_FALSE(late.fault);
  EXPECT_EQ(late.discard, 100u);
  auto id2 = *c.open(out);
  EXPECT_EQ(c.reset(id2), wu(id2, flag::rst));
  EXPECT_FALSE(c.reset(id2));
}

TEST_F(YamuxState, PingIsAnsweredAndPongMeasuresRtt) {
  MuxState c(Role::client, limits);
  c.on_frame({FrameType::ping, flag::syn, 0, 77}, t0, out);
  EXPECT_EQ(out.back(), (FrameHeader{FrameType::ping, flag::ack, 0, 77}));
  std::uint32_t id = 0;
  auto p = c.start_ping(t0, id);
  ASSERT_TRUE(p);
  auto in = c.on_frame({FrameType::ping, flag::ack, 0, id}, t0 + milliseconds(3), out);
  EXPECT_EQ(in.pong, id);
  EXPECT_EQ(c.rtt(), milliseconds(3));
  EXPECT_FALSE(c.on_frame({FrameType::ping, flag::ack, 0, 999}, t0, out).pong);
  EXPECT_TRUE(c.on_frame({FrameType::ping, flag::syn, 1, 1}, t0, out).fault);
}

TEST_F(YamuxState, GoAwayStopsNewStreams) {
  MuxState c(Role::client, limits);
  auto in = c.on_frame({FrameType::go_away, 0, 0, 0}, t0, out);
  EXPECT_EQ(in.go_away, GoAwayCode::normal);
  EXPECT_FALSE(c.open(out));
  MuxState s(Role::server, limits);
  EXPECT_EQ(s.go_away(GoAwayCode::normal), (FrameHeader{FrameType::go_away, 0, 0, 0}));
  out.clear();
  auto late = s.on_frame(wu(1, flag::syn), t0, out);
  EXPECT_FALSE(late.opened);
  EXPECT_EQ(out.back(), wu(1, flag::rst));
}

TEST_F(YamuxState, KeepalivePingsWhenQuietAndDeclaresDeadPeer) {
  limits.keepalive_interval = milliseconds(100);
  limits.keepalive_timeout = milliseconds(50);
  MuxState c(Role::client, limits);
  c.note_activity(t0);
  EXPECT_EQ(c.keepalive(t0 + milliseconds(50), out), KeepaliveAction::none);
  EXPECT_EQ(c.keepalive(t0 + milliseconds(100), out), KeepaliveAction::send_ping);
  EXPECT_EQ(out.back().type, FrameType::ping);
  EXPECT_EQ(c.keepalive(t0 + milliseconds(120), out), KeepaliveAction::none);
  // Traffic after the ping: alive again.
  c.note_activity(t0 + milliseconds(130));
  EXPECT_EQ(c.keepalive(t0 + milliseconds(160), out), KeepaliveAction::none);
  EXPECT_EQ(c.keepalive(t0 + milliseconds(230), out), KeepaliveAction::send_ping);
  EXPECT_EQ(c.keepalive(t0 + milliseconds(279), out), KeepaliveAction::none);
  EXPECT_EQ(c.keepalive(t0 + milliseconds(280), out), KeepaliveAction::dead);
}

TEST_F(YamuxState, TinyWindowUpdatesDoNotMakeTinyFrames) {
  MuxState c(Role::client, limits);
  auto id = *c.open(out);
  ASSERT_EQ(c.next_data(id, kWindow)->length, kWindow);
  // A hostile peer grants one byte at a time: nothing goes until min_send_frame has gathered.
  std::size_t frames = 0;
  for (std::uint32_t i = 0; i < 2 * limits.min_send_frame; ++i) {
    c.on_frame(wu(id, 0, 1), t0, out);
    auto h = c.next_data(id, 1 << 20);
    if (h->length > 0) {
      ++frames;
      EXPECT_GE(h->length, limits.min_send_frame);
    }
  }
  EXPECT_EQ(frames, 2u);
}

TEST_F(YamuxState, APingFloodGetsAGoAway) {
  MuxState s(Role::server, limits);
  std::uint32_t answered = 0;
  Inbound in;
  for (std::uint32_t i = 0; i < 10 * limits.ping_burst && !in.fault; ++i) {
    in = s.on_frame({FrameType::ping, flag::syn, 0, i}, t0, out);
    answered += !in.fault;
  }
  ASSERT_TRUE(in.fault);
  EXPECT_EQ(in.fault->code, GoAwayCode::protocol_error);
  EXPECT_EQ(answered, limits.ping_burst);
  EXPECT_EQ(out.back(), (FrameHeader{FrameType::go_away, 0, 0, 1}));
  // At the allowed rate, pings are answered for ever.
  MuxState ok(Role::server, limits);
  SteadyTime t = t0;
  for (std::uint32_t i = 0; i < 20 * limits.ping_burst; ++i) {
    t += std::chrono::microseconds(1'000'000 / limits.pings_per_second);
    ASSERT_FALSE(ok.on_frame({FrameType::ping, flag::syn, 0, i}, t, out).fault) << i;
  }
}

TEST_F(YamuxState, WindowGrowthStaysWithinTheSessionCeiling) {
  limits.session_window_growth = 3 * kWindow;  // room for three streams to double once
  MuxState s(Role::server, limits);
  for (std::uint32_t id = 1; id <= 9; id += 2) {
    s.on_frame(wu(id, flag::syn), t0, out);
    s.on_frame(data(id, kWindow), t0, out);
    s.consumed(id, kWindow / 2, t0 + std::chrono::microseconds(100));  // fast: wants to grow
  }
  EXPECT_EQ(s.window_growth(), 3 * kWindow);
  EXPECT_EQ(s.recv_window_size(1), 2 * kWindow);
  EXPECT_EQ(s.recv_window_size(9), kWindow);  // no room left
  // A stream that goes gives its growth back.
  s.on_frame(wu(1, flag::rst), t0, out);
  EXPECT_EQ(s.window_growth(), 2 * kWindow);
}

TEST_F(YamuxState, ASideThatAcceptsNoStreamsRefusesEverySyn) {
  limits.accept_backlog = 0;
  MuxState c(Role::client, limits);
  out.clear();
  auto in = c.on_frame(data(2, 100, flag::syn), t0, out);
  EXPECT_FALSE(in.opened);
  EXPECT_EQ(in.discard, 100u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], wu(2, flag::rst));
  EXPECT_EQ(c.stream_count(), 0u);
}

}  // namespace
}  // namespace runsnack::yamux
