#include "pool/browser/browser_protocol.hpp"
#include "pool/device_runs.hpp"

#include "crypto/identity.hpp"
#include "pool/wire.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace runsnack::pool::browser {
namespace {

using json = nlohmann::json;

std::string hex(std::span<const std::uint8_t> b) { return hex_encode({reinterpret_cast<const char*>(b.data()), b.size()}); }

// The "auth" message a page holding `secret` and `id` sends for `nonce`.
json auth_message(const Identity& id, std::string_view secret, const std::string& grant, const std::string& nonce) {
  const auto pub = id.public_key_raw();
  const std::string bytes = auth_bytes(nonce, grant, pub);
  const std::span<const std::uint8_t> data{reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
  const Key32 proof = hmac_sha256(derive_grant_key(secret), data);
  auto sig = id.sign(data);
  return {{"op", "auth"}, {"grant", grant}, {"public_key", hex(pub)}, {"proof", hex(proof)}, {"signature", hex(*sig)}};
}

TEST(BrowserProtocol, RightProofAndSignatureGiveTheBrowsersPeerId) {
  auto id = Identity::generate();
  ASSERT_TRUE(id);
  const std::string nonce = make_nonce();
  auto auth = parse_auth(auth_message(*id, "s3cret", "GRANT1", nonce).dump());
  ASSERT_TRUE(auth) << auth.error().what();
  auto peer = verify_auth(*auth, derive_grant_key("s3cret"), nonce);
  ASSERT_TRUE(peer) << peer.error().what();
  EXPECT_EQ(*peer, id->peer_id());
}

TEST(BrowserProtocol, WrongSecretOtherNonceOrForgedSignatureIsRefused) {
  auto id = Identity::generate();
  auto other = Identity::generate();
  ASSERT_TRUE(id && other);
  const std::string nonce = make_nonce();
  auto auth = parse_auth(auth_message(*id, "s3cret", "GRANT1", nonce).dump());
  ASSERT_TRUE(auth);
  EXPECT_FALSE(verify_auth(*auth, derive_grant_key("wrong"), nonce));
  EXPECT_FALSE(verify_auth(*auth, derive_grant_key("s3cret"), make_nonce()));  // replayed on another connection
  // Another key's public key with this key's signature: the signature does not hold.
  auto swapped = *auth;
  swapped.public_key = other->public_key_raw();
  EXPECT_FALSE(verify_auth(swapped, derive_grant_key("s3cret"), nonce));
  auto flipped = *auth;
  flipped.signature[0] ^= 1;
  auto r = verify_auth(flipped, derive_grant_key("s3cret"), nonce);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::auth_failed));
}

TEST(BrowserProtocol, AuthMessageIsParsedStrictly) {
  auto id = Identity::generate();
  ASSERT_TRUE(id);
  const json good = auth_message(*id, "s", "G", "n");
  for (const char* field : {"grant", "public_key", "proof", "signature"}) {
    json bad = good;
    bad.erase(field);
    EXPECT_FALSE(parse_auth(bad.dump())) << field;
    bad[field] = 7;
    EXPECT_FALSE(parse_auth(bad.dump())) << field;
  }
  json short_key = good;
  short_key["public_key"] = std::string(62, 'a');
  EXPECT_FALSE(parse_auth(short_key.dump()));
  json not_hex = good;
  not_hex["proof"] = std::string(64, 'z');
  EXPECT_FALSE(parse_auth(not_hex.dump()));
  EXPECT_FALSE(parse_auth(std::string(kMaxAuthMessageBytes + 1, ' ')));
  EXPECT_FALSE(parse_auth("not json"));
}

TEST(BrowserProtocol, RequestsAreWorkerOpsWithoutFrames) {
  EXPECT_TRUE(parse_request(R"({"op":"claim","max":2})"));
  EXPECT_TRUE(parse_request(R"({"op":"result","task":"t","attempt":1,"files":[]})"));
  EXPECT_FALSE(parse_request(R"({"op":"submit"})"));           // a client op, not a worker's
  EXPECT_FALSE(parse_request(R"({"op":["claim"]})"));
  EXPECT_FALSE(parse_request(R"([1,2])"));
  EXPECT_FALSE(parse_request(R"({"op":"result","frames":1})"));
  EXPECT_FALSE(parse_request(R"({"op":"results","results":[{"op":"result","frames":2}]})"));
  EXPECT_FALSE(parse_request(std::string(kMaxBrowserMessageBytes + 1, ' ')));
}

TEST(BrowserProtocol, RegisterStatesACapAndAbandonIsAWorkerOp) {
  // What join.js sends: a cap per task in whole seconds (pool/device_runs.hpp).
  auto reg = parse_request(R"({"op":"register","device":{"kind":"webgpu","runs":["render"],"max_task_seconds":5}})");
  ASSERT_TRUE(reg);
  EXPECT_EQ(pool::parse_max_task_seconds((*reg)["device"]).value(), std::optional<std::int64_t>(5));
  EXPECT_EQ(pool::parse_max_task_seconds(json{{"kind", "wasm"}}).value(), std::nullopt);
  EXPECT_EQ(pool::parse_max_task_seconds(json{{"max_task_seconds", nullptr}}).value(), std::nullopt);
  EXPECT_EQ(pool::parse_max_task_seconds(json{{"max_task_seconds", 86400}}).value(), std::optional<std::int64_t>(86400));
  for (const json& bad : {json(0), json(-1), json(86401), json(2.5), json("10"), json(true), json::array({10}),
                          json(std::numeric_limits<std::uint64_t>::max())}) {
    auto r = pool::parse_max_task_seconds(json{{"max_task_seconds", bad}});
    ASSERT_FALSE(r) << bad.dump();
    EXPECT_NE(r.error().message.find("1..86400"), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(parse_request(R"({"op":"abandon","task":"t","attempt":1})"));
}

}  // namespace
}  // namespace runsnack::pool::browser
