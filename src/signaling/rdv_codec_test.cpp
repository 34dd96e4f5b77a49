#include "signaling/rdv_codec.hpp"

#include "session/message.hpp"

#include <gtest/gtest.h>

namespace runsnack::rdv {
namespace {

Result<Message> roundtrip(const Message& m) {
  std::string frame = encode(m);
  return decode(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(frame.data()) + 4, frame.size() - 4));
}

const std::string kPeer = "eh7ddx5bksrgcytl7bkai36se4nxx3kl";

TEST(RdvCodec, RoundTripsEveryMessage) {
  Intro intro{std::string(kTokenLength, 'a'), {"198.51.100.1", 4000}, {"198.51.100.2", 5000},
              {{"192.0.2.10", 7443}}, 40, 3, true, Endpoint{"198.51.100.2", 7443}};
  std::vector<Message> all = {Register{kPeer, {"abcdefghij"}, {{"192.0.2.10", 7443}}, std::nullopt},
                              Challenge{std::string(kNonceLength - 1, 'a') + "q"},
                              Prove{std::string(kKeyLength - 1, 'b') + "q", std::string(kSigLength - 1, 'c') + "a"},
                              Registered{{"198.51.100.1", 4000}},
                              Ping{7},
                              Pong{7},
                              Connect{kPeer, "abcdefghij", {}},
                              intro,
                              Relay{std::string(kTokenLength, 'b'), "consumer"},
                              RelayOk{},
                              ErrorMsg{"no"}};
  for (const auto& m : all) {
    auto back = roundtrip(m);
    ASSERT_TRUE(back) << to_json(m).dump() << ": " << back.error().what();
    EXPECT_EQ(to_json(*back), to_json(m));
  }
}

TEST(RdvCodec, RefusesBadInput) {
  auto bad = [](const char* text) {
    auto j = nlohmann::json::parse(text);
    return !from_json(j).has_value();
  };
  EXPECT_TRUE(bad(R"({"t":"nope"})"));
  EXPECT_TRUE(bad(R"({"t":"connect","peer":"short","grant":"abcdefghij","candidates":[]})"));
  EXPECT_TRUE(bad(R"({"t":"relay","token":"aaaaaaaaaaaaaaaaaaaaaaaaaa","side":"third"})"));
  EXPECT_TRUE(bad(R"({"t":"register","peer":"eh7ddx5bksrgcytl7bkai36se4nxx3kl","grants":["abcdefghij"],
                      "candidates":["1.2.3.4:1","1.2.3.4:2","1.2.3.4:3","1.2.3.4:4","1.2.3.4:5","1.2.3.4:6",
                                    "1.2.3.4:7","1.2.3.4:8","1.2.3.4:9"]})"));
  EXPECT_TRUE(bad(R"({"t":"ping","n":"1"})"));
  EXPECT_TRUE(bad(R"({"t":"challenge","nonce":"abc"})"));
  EXPECT_TRUE(bad(R"({"t":"prove","key":"aaaa","sig":"bbbb"})"));
}

TEST(RdvCodec, RefusesOversizedFrames) {
  std::array<std::uint8_t, 4> prefix{0, 0, 0x10, 0x01};  // 4097 bytes
  EXPECT_FALSE(decode_message_length(prefix, kMaxRdvMessageBytes));
}

}  // namespace
}  // namespace runsnack::rdv
