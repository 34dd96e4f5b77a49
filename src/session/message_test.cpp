#include "session/auth.hpp"
#include "session/goodbye.hpp"
#include "session/message.hpp"
#include "session/stream_header.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

Result<nlohmann::json> decode(const std::string& wire) {
  std::span<const std::uint8_t> all(reinterpret_cast<const std::uint8_t*>(wire.data()), wire.size());
  auto len = decode_message_length(all.first<kMessagePrefixBytes>());
  if (!len) return len.error();
  if (all.size() - kMessagePrefixBytes != *len) return fail(errc::malformed, "length mismatch");
  return decode_message_body(all.subspan(kMessagePrefixBytes));
}

TEST(Message, KnownAnswerFraming) {
  std::string wire = encode_message({{"a", 1}});
  ASSERT_EQ(wire.size(), 4u + 7u);
  EXPECT_EQ(wire.substr(0, 4), std::string("\0\0\0\x07", 4));
  EXPECT_EQ(wire.substr(4), R"({"a":1})");
  EXPECT_EQ(decode(wire).value()["a"], 1);
}

TEST(Message, RejectsOversizeAndGarbage) {
  std::uint8_t big[4] = {0x00, 0x01, 0x00, 0x01};  // 65537 bytes
  auto r = decode_message_length(std::span<const std::uint8_t, 4>(big));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::too_large));
  std::string notjson = "{\"a\":";
  EXPECT_FALSE(decode_message_body({reinterpret_cast<const std::uint8_t*>(notjson.data()), notjson.size()}));
  std::string array = "[1,2]";
  EXPECT_FALSE(decode_message_body({reinterpret_cast<const std::uint8_t*>(array.data()), array.size()}));
  std::string deep(100, '[');
  deep = "{\"a\":" + deep + std::string(100, ']') + "}";
  auto d = decode_message_body({reinterpret_cast<const std::uint8_t*>(deep.data()), deep.size()});
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("deep"), std::string::npos);
}

TEST(Message, BodyLimitIsTheCallers) {
  // Services with bigger messages (the pool's results) pass their own limit.
  std::string body = "{\"a\":\"" + std::string(200 * 1024, 'x') + "\"}";
  std::span<const std::uint8_t> bytes{reinterpret_cast<const std::uint8_t*>(body.data()), body.size()};
  EXPECT_FALSE(decode_message_body(bytes));
  EXPECT_TRUE(decode_message_body(bytes, 1024 * 1024));
}

TEST(Auth, HelloRoundTripAndValidation) {
  AuthHello hello;
  hello.grant_id = "abcdefghij";
  hello.proof.fill(0xab);
  auto back = parse_auth_hello(to_json(hello));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->grant_id, "abcdefghij");
  EXPECT_EQ(back->proof, hello.proof);

  auto j = to_json(hello);
  j["v"] = 2;
  EXPECT_TRUE(parse_auth_hello(j).error().is(errc::unsupported));
  j = to_json(hello);
  j["proof"] = "short";
  EXPECT_FALSE(parse_auth_hello(j));
  j = to_json(hello);
  j.erase("grant");
  EXPECT_NE(parse_auth_hello(j).error().message.find("grant"), std::string::npos);
}

TEST(Auth, ReplyCarriesReasonAndCode) {
  AuthReply refused{false, errc::expired, "link expired at X", ""};
  auto back = parse_auth_reply(to_json(refused)).value();
  EXPECT_FALSE(back.ok);
  EXPECT_EQ(back.code, errc::expired);
  EXPECT_EQ(back.reason, "link expired at X");
  AuthReply ok{true, errc::ok, "", "s1"};
  EXPECT_EQ(parse_auth_reply(to_json(ok)).value().session_id, "s1");
}

TEST(Auth, HelloSaysTheConsumerHearsGoodbyes) {
  AuthHello hello;
  hello.grant_id = "abcdefghij";
  EXPECT_FALSE(to_json(hello).contains("goodbye"));  // as an older consumer's
  EXPECT_FALSE(parse_auth_hello(to_json(hello)).value().hears_goodbye);
  hello.hears_goodbye = true;
  EXPECT_EQ(to_json(hello)["goodbye"], true);
  EXPECT_TRUE(parse_auth_hello(to_json(hello)).value().hears_goodbye);
}

TEST(Goodbye, RoundTripAndValidation) {
  const Goodbye kicked{kEndedKicked, "ended by `runsnack kick`"};
  const StreamHeader header = goodbye_header(kicked);
  auto back = parse_goodbye(parse_stream_header(to_json(header)).value()).value();
  EXPECT_EQ(back.ended, "kicked");
  EXPECT_EQ(back.message, "ended by `runsnack kick`");
  // A newer provider's word is kept as it is; a message is cut to its bound when sent.
  EXPECT_EQ(parse_goodbye({kServiceGoodbye, {{"ended", "maintenance"}, {"message", ""}}}).value().ended, "maintenance");
  EXPECT_EQ(goodbye_header({kEndedRevoked, std::string(2000, 'x')}).args["message"].get<std::string>().size(),
            kMaxGoodbyeMessage);
  // Anything else a provider could open is refused.
  EXPECT_FALSE(parse_goodbye({"info", {{"ended", "kicked"}, {"message", ""}}}));
  EXPECT_FALSE(parse_goodbye({kServiceGoodbye, {{"message", "no word"}}}));
  EXPECT_FALSE(parse_goodbye({kServiceGoodbye, {{"ended", "Kicked!"}, {"message", ""}}}));
  EXPECT_FALSE(parse_goodbye({kServiceGoodbye, {{"ended", std::string(33, 'a')}, {"message", ""}}}));
  EXPECT_FALSE(parse_goodbye({kServiceGoodbye, {{"ended", "kicked"}, {"message", std::string(600, 'x')}}}));
  EXPECT_FALSE(parse_goodbye({kServiceGoodbye, {{"ended", "kicked"}}}));
}

TEST(StreamHeader, ValidatesServiceName) {
  EXPECT_EQ(parse_stream_header({{"service", "info"}}).value().service, "info");
  EXPECT_FALSE(parse_stream_header({{"service", "Info!"}}));
  EXPECT_FALSE(parse_stream_header({{"service", ""}}));
  EXPECT_FALSE(parse_stream_header({{"service", "info"}, {"args", 3}}));
  auto r = parse_stream_reply(to_json(StreamReply{false, errc::refused, "not allowed"})).value();
  EXPECT_EQ(r.code, errc::refused);
}

}  // namespace
}  // namespace runsnack
