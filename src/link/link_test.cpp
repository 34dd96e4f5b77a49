#include "link/link.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

const std::string kPeer = "eh7ddx5bksrgcytl7bkai36se4nxx3kl";
const std::string kSecret = "mfrggzdfmztwq2lknnwg23tpoa";
const std::string kDirect = "runsnack:///g/abcdefghij?peer=" + kPeer + "&c=192.0.2.7:7000#k=" + kSecret;

std::string error_of(std::string_view text) {
  auto r = parse_link(text);
  return r ? std::string("<parsed>") : r.error().message;
}

Link sample() {
  Link link;
  link.rendezvous = Endpoint{"rdv.example.org", 7443};
  link.candidates = {{"192.0.2.7", 7000}};
  link.provider = *PeerId::parse(kPeer);
  link.grant_id = "abcdefghij";
  link.secret = kSecret;
  return link;
}

TEST(Link, FormatsTheDocumentedExampleAndStaysShort) {
  std::string text = format_link(sample());
  EXPECT_EQ(text, "runsnack://rdv.example.org:7443/g/abcdefghij?peer=" + kPeer + "&c=192.0.2.7:7000#k=" + kSecret);
  EXPECT_LT(text.size(), 160u);
  auto back = parse_link(text);
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(*back, sample());
}

TEST(Link, DirectOnlyWithIpv6AndNames) {
  std::string text = "runsnack:///g/abcdefghij?peer=" + kPeer +
                     "&c=192.0.2.7:7000,[2001:db8::1]:7000,gpu.lan:7001#k=" + kSecret;
  auto link = parse_link(text);
  ASSERT_TRUE(link) << link.error().what();
  EXPECT_FALSE(link->rendezvous);
  ASSERT_EQ(link->candidates.size(), 3u);
  EXPECT_EQ(link->candidates[1], (Endpoint{"2001:db8::1", 7000}));
  EXPECT_EQ(link->candidates[2], (Endpoint{"gpu.lan", 7001}));
  EXPECT_EQ(format_link(*link), text);  // brackets stay unescaped
  // The RFC 3986 spelling means the same.
  auto escaped = parse_link("runsnack:///g/abcdefghij?peer=" + kPeer +
                            "&c=192.0.2.7:7000,%5B2001:db8::1%5D:7000,gpu.lan:7001#k=" + kSecret);
  ASSERT_TRUE(escaped) << escaped.error().what();
  EXPECT_EQ(*escaped, *link);
}

TEST(Link, Ipv6Rendezvous) {
  Link link = sample();
  link.rendezvous = Endpoint{"2001:db8::7", 7443};
  link.candidates.clear();
  std::string text = format_link(link);
  EXPECT_EQ(text.rfind("runsnack://[2001:db8::7]:7443/g/", 0), 0u);
  auto back = parse_link(text);
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(*back, link);
}

TEST(Link, RoundTripsFreshValues) {
  for (int i = 0; i < 50; ++i) {
    Link link = sample();
    link.grant_id = new_grant_id();
    link.secret = new_secret();
    EXPECT_EQ(link.grant_id.size(), kGrantIdLength);
    EXPECT_EQ(link.secret.size(), kSecretLength);
    auto back = parse_link(format_link(link));
    ASSERT_TRUE(back) << back.error().what();
    EXPECT_EQ(*back, link);
  }
  EXPECT_NE(new_secret(), new_secret());
  EXPECT_NE(new_grant_id(), new_grant_id());
}

TEST(Link, TrimsSurroundingWhitespaceOnly) {
  EXPECT_TRUE(parse_link("  \t" + kDirect + "\r\n"));
  EXPECT_NE(error_of("runsnack:///g/abcdefghij?peer=" + kPeer + " &c=192.0.2.7:7000#k=" + kSecret)
                .find("invalid character ' ' at position"),
            std::string::npos);
}

TEST(Link, ForwardCompatibleQueryAndFragment) {
  auto link = parse_link("runsnack:///g/abcdefghij?peer=" + kPeer + "&relay=r.example:1&x&c=192.0.2.7:7000#k=" +
                         kSecret + "&future=1");
  ASSERT_TRUE(link) << link.error().what();
  EXPECT_EQ(format_link(*link), kDirect);
}

TEST(Link, CaseOfBase32FieldsIsCanonicalised) {
  std::string upper = "RUNSNACK:///g/ABCDEFGHIJ?peer=EH7DDX5BKSRGCYTL7BKAI36SE4NXX3KL&c=192.0.2.7:7000#k=MFRGGZDFMZTWQ2LKNNWG23TPOA";
  auto link = parse_link(upper);
  ASSERT_TRUE(link) << link.error().what();
  EXPECT_EQ(format_link(*link), kDirect);
}

TEST(Link, ErrorsNameWhatIsWrong) {
  const std::string base = "runsnack:///g/abcdefghij?peer=" + kPeer;
  struct Case {
    std::string text;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"", "link: empty"},
      {"   ", "link: empty"},
      {"https://example.org/g/abcdefghij", "link: not a runsnack link (scheme must be runsnack://)"},
      {"runsnack:/g/abcdefghij", "scheme must be runsnack://"},
      {"runsnack://", "the link was probably cut off"},
      {base + "&c=192.0.2.7:7000", "link: missing secret (#k=...): the link was probably cut off when copied"},
      {base + "&c=192.0.2.7:7000#", "link: missing secret"},
      {base + "&c=192.0.2.7:7000#k=", "link: missing secret"},
      {base + "&c=192.0.2.7:7000#x=1", "link: missing secret"},
      {"runsnack://rdv.example.org:7443/g/abcd", "the link was probably cut off"},
      {"runsnack://[2001:db8", "the link was probably cut off"},
      {base.substr(0, base.size() - 1) + "&c=192.0.2.7:7000#k=" + kSecret,
       "link: peer id must be 32 base32 characters (got 31)"},
      {"runsnack:///g/abcdefghij?peer=" + kPeer.substr(0, 31) + "1&c=192.0.2.7:7000#k=" + kSecret,
       "link: peer id must be base32"},
      {"runsnack:///g/abcdefghij?c=192.0.2.7:7000#k=" + kSecret, "link: missing provider id (peer=...)"},
      {base + "&peer=" + kPeer + "&c=192.0.2.7:7000#k=" + kSecret, "link: peer= appears twice"},
      {base + "&c=192.0.2.7:7000&c=192.0.2.8:7000#k=" + kSecret, "link: c= appears twice"},
      {base + "&c=#k=" + kSecret, "link: c= is empty"},
      {"runsnack:///g/abcdefghij?peer=&c=192.0.2.7:7000#k=" + kSecret, "link: peer= is empty"},
      {base + "&c=1.2.3.4:99999#k=" + kSecret, "link: bad candidate address '1.2.3.4:99999' (port must be 1-65535)"},
      {base + "&c=192.0.2.7:7000,#k=" + kSecret, "link: bad candidate address ''"},
      {base + "&c=192.0.2.7#k=" + kSecret, "link: bad candidate address '192.0.2.7' (missing port)"},
      {base + "#k=" + kSecret, "link: no way to reach the provider"},
      {"runsnack://user@rdv.example.org:7443/g/abcdefghij?peer=" + kPeer + "#k=" + kSecret,
       "link: bad rendezvous address 'user@rdv.example.org:7443' (user info is not allowed)"},
      {"runsnack://rdv.example.org/g/abcdefghij?peer=" + kPeer + "#k=" + kSecret, "(missing port)"},
      {"runsnack:///h/abcdefghij?peer=" + kPeer + "#k=" + kSecret,
       "link: this link needs a newer runsnack (unknown link type '/h/')"},
      {"runsnack:///?peer=" + kPeer + "#k=" + kSecret, "link: missing /g/<grant id>"},
      {"runsnack:///g/abcdefghij/x?peer=" + kPeer + "#k=" + kSecret, "link: path must be /g/<grant id>"},
      {"runsnack:///g/abcdefghi?peer=" + kPeer + "&c=192.0.2.7:7000#k=" + kSecret,
       "link: grant id must be 10 base32 characters (got 9)"},
      {"runsnack:///g/abcdefghi0?peer=" + kPeer + "&c=192.0.2.7:7000#k=" + kSecret, "link: grant id must be base32"},
      {base + "&c=192.0.2.7:7000#k=" + kSecret.substr(1), "link: secret must be 26 base32 characters (got 25)"},
      {base + "&c=192.0.2.7:7000#k=" + kSecret + "a", "link: secret must be 26 base32 characters (got 27)"},
      {base + "&c=192.0.2.7:7000#k=" + kSecret.substr(0, 25) + "b", "link: secret is not valid base32"},
      {base + "&c=192.0.2.7:7000#k=" + kSecret + "&k=" + kSecret, "link: k= appears twice"},
      {base + "&c=192.0.2.7:7000#k=" + kSecret + "#k=x", "link: not a valid URL"},
      {base + "&c=192.0.2.7:7000#k=" + kSecret + "\xc3\xa9", "link: invalid character '0xc3' at position"},
      {base + "&c=%0a:1#k=" + kSecret, "link: bad candidate address '?:1'"},
      {"runsnack://" + std::string(3000, 'a'), "link: too long (3011 characters, at most 2048)"},
  };
  for (const Case& c : cases) {
    std::string got = error_of(c.text);
    EXPECT_NE(got.find(c.fragment), std::string::npos) << "input: " << c.text << "\n got: " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos);
  }
}

TEST(Link, EmptyQueryAndFragmentDoNotCrash) {
  // Boost.URL 1.81 params iteration reads out of bounds on "?#" (boostorg/url#864).
  EXPECT_NE(error_of("runsnack://rdv.example.org:3721/g/abcdefghij?#k=mfrggzdfmztw,oa").find("link: missing provider id"),
            std::string::npos);
  EXPECT_NE(error_of("runsnack://rdv.example.org:3721/g/abcdefghij?peer=" + kPeer + "#").find("missing secret"),
            std::string::npos);
  EXPECT_NE(error_of("runsnack://rdv.example.org:3721/g/abcdefghij?&&=&#&&").find("missing provider id"),
            std::string::npos);
}

TEST(Link, AtMostSixteenCandidates) {
  std::string list;
  for (int i = 1; i <= 17; ++i) list += (i > 1 ? "," : "") + std::string("192.0.2.") + std::to_string(i) + ":7000";
  std::string text = "runsnack:///g/abcdefghij?peer=" + kPeer + "&c=" + list + "#k=" + kSecret;
  auto r = parse_link(text);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::too_large));
  EXPECT_NE(r.error().message.find("too many candidates"), std::string::npos);
  std::string sixteen = text.substr(0, text.find(",192.0.2.17")) + "#k=" + kSecret;
  auto ok = parse_link(sixteen);
  ASSERT_TRUE(ok) << ok.error().what();
  EXPECT_EQ(ok->candidates.size(), 16u);
}

TEST(Link, EveryTruncationFailsCleanly) {
  std::string text = format_link(sample());
  for (std::size_t n = 0; n < text.size(); ++n) {
    auto r = parse_link(std::string_view(text).substr(0, n));
    EXPECT_FALSE(r) << n;
  }
}

}  // namespace
}  // namespace runsnack
