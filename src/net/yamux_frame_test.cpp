#include "net/yamux_frame.hpp"

#include <gtest/gtest.h>

namespace runsnack::yamux {
namespace {

using Bytes = EncodedHeader;

Result<FrameHeader> decode(const Bytes& b) {
  return decode_header(std::span<const std::uint8_t, kHeaderSize>(b));
}

TEST(YamuxFrame, EncodesKnownAnswers) {
  // Data, SYN, stream 1, 5 bytes.
  EXPECT_EQ(encode_header({FrameType::data, flag::syn, 1, 5}),
            (Bytes{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5}));
  // WindowUpdate, ACK|FIN, stream 0x01020304, delta 0x00040000 (256 KiB).
  EXPECT_EQ(encode_header({FrameType::window_update, flag::ack | flag::fin, 0x01020304, 0x40000}),
            (Bytes{0, 1, 0, 6, 1, 2, 3, 4, 0, 4, 0, 0}));
  // Ping ACK with opaque id 0xdeadbeef.
  EXPECT_EQ(encode_header({FrameType::ping, flag::ack, 0, 0xdeadbeef}),
            (Bytes{0, 2, 0, 2, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}));
  // GoAway protocol error.
  EXPECT_EQ(encode_header({FrameType::go_away, 0, 0, 1}),
            (Bytes{0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  // RST on the largest stream id.
  EXPECT_EQ(encode_header({FrameType::window_update, flag::rst, 0xffffffff, 0}),
            (Bytes{0, 1, 0, 8, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}));
}

TEST(YamuxFrame, DecodesWhatItEncodes) {
  FrameHeader h{FrameType::data, flag::fin, 0x80000001, 0x12345678};
  auto d = decode(encode_header(h));
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, h);
  auto k = decode(Bytes{0, 1, 0, 3, 0, 0, 0, 2, 0, 0, 1, 0});
  ASSERT_TRUE(k);
  EXPECT_EQ(k->type, FrameType::window_update);
  EXPECT_EQ(k->flags, flag::syn | flag::ack);
  EXPECT_EQ(k->stream_id, 2u);
  EXPECT_EQ(k->length, 256u);
}

TEST(YamuxFrame, RejectsBadVersionTypeAndFlags) {
  auto v = decode(Bytes{1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0});
  ASSERT_FALSE(v);
  EXPECT_TRUE(v.error().is(errc::malformed));
  EXPECT_FALSE(decode(Bytes{0, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_FALSE(decode(Bytes{0, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_FALSE(decode(Bytes{0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_FALSE(decode(Bytes{0, 0, 0x80, 0, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_TRUE(decode(Bytes{0, 0, 0, 0x0f, 0, 0, 0, 1, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace runsnack::yamux
