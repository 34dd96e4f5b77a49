#include "link/link.hpp"

#include <gtest/gtest.h>

#include <cctype>

namespace runsnack {
namespace {

const std::string kPeer = "eh7ddx5bksrgcytl7bkai36se4nxx3kl";
const std::string kSecret = "mfrggzdfmztwq2lknnwg23tpoa";
// The path spelling format_link writes, and the first spelling, still read.
const std::string kDirect = "runsnack:///g/abcdefghij/p/" + kPeer + "/c/192.0.2.7:7000/k/" + kSecret;
const std::string kQueryDirect = "runsnack:///g/abcdefghij?peer=" + kPeer + "&c=192.0.2.7:7000#k=" + kSecret;

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
  EXPECT_EQ(text, "runsnack://rdv.example.org:7443/g/abcdefghij/p/" + kPeer + "/c/192.0.2.7:7000/k/" + kSecret);
  EXPECT_EQ(text.size(), 125u);  // as link.hpp says
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
  // Written in the path spelling, IPv6 without brackets; read back the same.
  const std::string path = "runsnack:///g/abcdefghij/p/" + kPeer + "/c/192.0.2.7:7000,2001:db8::1:7000,gpu.lan:7001/k/" +
                           kSecret;
  EXPECT_EQ(format_link(*link), path);
  auto again = parse_link(path);
  ASSERT_TRUE(again) << again.error().what();
  EXPECT_EQ(*again, *link);
  // Brackets typed by hand in the path spelling mean the same.
  auto bracketed = parse_link("runsnack:///g/abcdefghij/p/" + kPeer +
                              "/c/192.0.2.7:7000,[2001:db8::1]:7000,gpu.lan:7001/k/" + kSecret);
  ASSERT_TRUE(bracketed) << bracketed.error().what();
  EXPECT_EQ(*bracketed, *link);
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
  EXPECT_EQ(text.rfind("runsnack://2001:db8::7:7443/g/", 0), 0u);
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

TEST(Link, RemovesWhitespaceAnywhere) {
  // Around it (copy-paste), and inside it: a chat client that wrapped it, with an indent or invisible marks.
  EXPECT_TRUE(parse_link("  \t" + kDirect + "\r\n"));
  for (std::string_view mark : {"\n", "\r\n    ", " ", "\t", "\xc2\xa0", "\xe2\x80\x8b", "\xc2\xad"}) {
    for (std::size_t cut : {std::size_t{3}, std::size_t{20}, kDirect.size() / 2, kDirect.size() - 5}) {
      for (const std::string& text : {kDirect, kQueryDirect}) {
        std::string wrapped = text.substr(0, cut) + std::string(mark) + text.substr(cut);
        auto link = parse_link(wrapped);
        ASSERT_TRUE(link) << wrapped << ": " << link.error().what();
        EXPECT_EQ(format_link(*link), kDirect);
      }
    }
  }
  EXPECT_NE(error_of(kDirect + "\xc2").find("invalid character '0xc2'"), std::string::npos);
}

TEST(Link, WrittenLinksAreShellSafe) {
  // Nothing bash, zsh or fish would expand, glob, split, redirect or comment out (issue 39).
  constexpr std::string_view kShellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:/,";
  Link link = sample();
  link.candidates = {{"192.0.2.7", 7000}, {"2001:db8::1", 7001}, {"::ffff:192.0.2.9", 7002}, {"gpu.lan", 7003}};
  for (const auto& rdv : {std::optional<Endpoint>{}, std::optional<Endpoint>{Endpoint{"2001:db8::7", 7443}}}) {
    link.rendezvous = rdv;
    std::string text = format_link(link);
    EXPECT_EQ(text.find_first_not_of(kShellSafe), std::string::npos) << text;
    auto back = parse_link(text);
    ASSERT_TRUE(back) << back.error().what();
    EXPECT_EQ(*back, link);
  }
}

TEST(Link, ReadsTheFirstSpelling) {
  auto link = parse_link(kQueryDirect);
  ASSERT_TRUE(link) << link.error().what();
  EXPECT_EQ(format_link(*link), kDirect);
  auto path = parse_link(kDirect);
  ASSERT_TRUE(path) << path.error().what();
  EXPECT_EQ(*path, *link);
}

TEST(Link, ForwardCompatibleQueryAndFragment) {
  auto link = parse_link("runsnack:///g/abcdefghij?peer=" + kPeer + "&relay=r.example:1&x&c=192.0.2.7:7000#k=" +
                         kSecret + "&future=1");
  ASSERT_TRUE(link) << link.error().what();
  EXPECT_EQ(format_link(*link), kDirect);
}

TEST(Link, ForwardCompatiblePathKeys) {
  // Unknown keys anywhere after /g/ID are a later version's: ignored, in any order, with a trailing '/'.
  auto link = parse_link("runsnack:///g/abcdefghij/r/r.example:1/k/" + kSecret + "/c/192.0.2.7:7000/p/" + kPeer +
                         "/future/1/");
  ASSERT_TRUE(link) << link.error().what();
  EXPECT_EQ(format_link(*link), kDirect);
}

TEST(Link, CaseOfBase32FieldsIsCanonicalised) {
  std::string upper = "RUNSNACK:///g/ABCDEFGHIJ?peer=EH7DDX5BKSRGCYTL7BKAI36SE4NXX3KL&c=192.0.2.7:7000#k=MFRGGZDFMZTWQ2LKNNWG23TPOA";
  auto link = parse_link(upper);
  ASSERT_TRUE(link) << link.error().what();
  EXPECT_EQ(format_link(*link), kDirect);
  std::string all_upper = kDirect;
  for (char& c : all_upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto path = parse_link(all_upper);
  ASSERT_TRUE(path) << path.error().what();
  EXPECT_EQ(format_link(*path), kDirect);
}

TEST(Link, UnfinishedIsALinkWithoutItsWholeSecret) {
  // What a reader of stdin reads on for: the first line of a wrapped link.
  for (const std::string& text : {kDirect, kQueryDirect}) {
    EXPECT_FALSE(link_is_unfinished(text));
    for (std::size_t n = 1; n < text.size(); ++n) EXPECT_TRUE(link_is_unfinished(text.substr(0, n))) << text.substr(0, n);
  }
  EXPECT_FALSE(link_is_unfinished(""));
  EXPECT_FALSE(link_is_unfinished("gpubox"));
  EXPECT_FALSE(link_is_unfinished("https://example.org/"));
  EXPECT_FALSE(link_is_unfinished(kDirect.substr(0, kDirect.size() - 1) + "1"));  // a whole secret, damaged
  EXPECT_FALSE(link_is_unfinished(kDirect + "a"));                                // too long: nothing will fix it
}

TEST(Link, ErrorsNameWhatIsWrong) {
  const std::string base = "runsnack:///g/abcdefghij?peer=" + kPeer;
  const std::string path = "runsnack:///g/abcdefghij/p/" + kPeer;
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
      {base + "&c=192.0.2.7:7000", "link: missing secret (#k=...): the link was cut off when copied, or by a shell"},
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
      {std::string(9000, ' '), "link: too long (9000 characters, at most 2048)"},
      // The path spelling.
      {path + "/c/192.0.2.7:7000", "link: missing secret (/k/...): the link was probably cut off when copied"},
      {path + "/c/192.0.2.7:7000/k", "link: missing secret"},
      {path + "/c/192.0.2.7:7000/k/", "link: missing secret"},
      {"runsnack://rdv.example.org:7443", "the link was probably cut off"},
      {path.substr(0, path.size() - 1) + "/c/192.0.2.7:7000/k/" + kSecret,
       "link: peer id must be 32 base32 characters (got 31)"},
      {"runsnack:///g/abcdefghij/c/192.0.2.7:7000/k/" + kSecret, "link: missing provider id (/p/...)"},
      {"runsnack:///g/abcdefghij/p//c/192.0.2.7:7000/k/" + kSecret, "link: missing provider id (/p/...)"},
      {path + "/p/" + kPeer + "/c/192.0.2.7:7000/k/" + kSecret, "link: p/ appears twice"},
      {path + "/c/192.0.2.7:7000/c/192.0.2.8:7000/k/" + kSecret, "link: c/ appears twice"},
      {path + "/c//k/" + kSecret, "link: c/ is empty"},
      {path + "/c/192.0.2.7:7000/k/" + kSecret + "/x", "link: path must be KEY/VALUE pairs ('x' has no value)"},
      {path + "//c/192.0.2.7:7000/k/" + kSecret, "link: empty path segment"},
      {path + "/c/1.2.3.4:99999/k/" + kSecret, "link: bad candidate address '1.2.3.4:99999' (port must be 1-65535)"},
      {path + "/c/192.0.2.7/k/" + kSecret, "link: bad candidate address '192.0.2.7' (missing port)"},
      {path + "/c/2001:db8::1/k/" + kSecret, "link: bad candidate address"},
      {path + "/k/" + kSecret, "link: no way to reach the provider (needs a rendezvous address or /c/HOST:PORT)"},
      {"runsnack://rdv.example.org/g/abcdefghij/p/" + kPeer + "/k/" + kSecret, "(missing port)"},
      {"runsnack:///h/abcdefghij/p/" + kPeer + "/k/" + kSecret,
       "link: this link needs a newer runsnack (unknown link type '/h/')"},
      {"runsnack://g/abcdefghij/p/" + kPeer + "/k/" + kSecret, "link: path must be /g/<grant id>/p/<provider id>/"},
      {"runsnack:///g/abcdefghi/p/" + kPeer + "/c/192.0.2.7:7000/k/" + kSecret,
       "link: grant id must be 10 base32 characters (got 9)"},
      {path + "/c/192.0.2.7:7000/k/" + kSecret.substr(1), "link: secret must be 26 base32 characters (got 25)"},
      {path + "/c/192.0.2.7:7000/k/" + kSecret.substr(0, 25) + "b", "link: secret is not valid base32"},
      {path + "/c/192.0.2.7:7000/k/" + kSecret + "/k/" + kSecret, "link: k/ appears twice"},
      {path + "/c/192.0.2.7:7000/k/" + kSecret + "*", "link: invalid character '*' at position"},
      {path + "/c/%5B::1%5D:1/k/" + kSecret, "link: invalid character '%'"},
      {"runsnack://user@rdv.example.org:7443/g/abcdefghij/p/" + kPeer + "/k/" + kSecret, "link: invalid character '@'"},
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
  auto path = parse_link("runsnack:///g/abcdefghij/p/" + kPeer + "/c/" + list + "/k/" + kSecret);
  ASSERT_FALSE(path);
  EXPECT_TRUE(path.error().is(errc::too_large));
}

TEST(Link, EveryTruncationFailsCleanly) {
  for (const std::string& text : {format_link(sample()), kQueryDirect}) {
    for (std::size_t n = 0; n < text.size(); ++n) {
      auto r = parse_link(std::string_view(text).substr(0, n));
      EXPECT_FALSE(r) << n;
    }
  }
}

}  // namespace
}  // namespace runsnack
