#include "services/forward/host_rewriter.hpp"

#include <gtest/gtest.h>

#include <string>

namespace runsnack {
namespace {

std::string run(HostRewriter& r, const std::string& in, std::size_t piece = 0) {
  std::string out;
  if (piece == 0) piece = in.size() ? in.size() : 1;
  for (std::size_t i = 0; i < in.size(); i += piece) {
    auto n = std::min(piece, in.size() - i);
    r.feed(std::span(reinterpret_cast<const std::uint8_t*>(in.data() + i), n), out);
  }
  return out;
}

std::string run(const std::string& in, std::size_t piece = 0) {
  HostRewriter r("127.0.0.1:11434");
  return run(r, in, piece);
}

TEST(HostRewriter, RewritesHostOfEachRequestInAnySplit) {
  const std::string in =
      "GET /a HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\r\n"
      "POST /b HTTP/1.1\r\nhost: x\r\nContent-Length: 22\r\n\r\nHost: not-a-header!!\r\n"
      "GET /c HTTP/1.1\r\nHOST: y\r\n\r\n";
  const std::string want =
      "GET /a HTTP/1.1\r\nHost: 127.0.0.1:11434\r\nAccept: */*\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: 127.0.0.1:11434\r\nContent-Length: 22\r\n\r\nHost: not-a-header!!\r\n"
      "GET /c HTTP/1.1\r\nHost: 127.0.0.1:11434\r\n\r\n";
  for (std::size_t piece : {0, 1, 2, 3, 7, 64}) EXPECT_EQ(run(in, piece), want) << piece;
}

TEST(HostRewriter, ChunkedBodyPassesUntouched) {
  const std::string body = "5;ext=1\r\nHost:\r\n0\r\nX-Trailer: 1\r\n\r\n";
  const std::string in = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
                         "GET / HTTP/1.1\r\nHost: b\r\n\r\n";
  const std::string want = "POST / HTTP/1.1\r\nHost: 127.0.0.1:11434\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
                           "GET / HTTP/1.1\r\nHost: 127.0.0.1:11434\r\n\r\n";
  for (std::size_t piece : {0, 1, 5}) EXPECT_EQ(run(in, piece), want) << piece;
}

TEST(HostRewriter, AddsMissingHostAndCollapsesDuplicates) {
  EXPECT_EQ(run("GET / HTTP/1.0\r\n\r\n"), "GET / HTTP/1.0\r\nHost: 127.0.0.1:11434\r\n\r\n");
  EXPECT_EQ(run("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), "GET / HTTP/1.1\r\nHost: 127.0.0.1:11434\r\n\r\n");
}

TEST(HostRewriter, UpgradeThenTunnel) {
  HostRewriter r("h:1");
  std::string in = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  EXPECT_EQ(run(r, in), "GET /ws HTTP/1.1\r\nHost: h:1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
  EXPECT_TRUE(r.passthrough());
  std::string frames = "\x81\x85GET / HTTP/1.1\r\nHost: z\r\n\r\n";
  EXPECT_EQ(run(r, frames), frames);
}

TEST(HostRewriter, NotHttpPassesThrough) {
  HostRewriter r("h:1");
  std::string in = "SSH-2.0-OpenSSH_9\r\n\r\nHost: x\r\n\r\n";
  EXPECT_EQ(run(r, in), in);
  EXPECT_TRUE(r.passthrough());
  HostRewriter big("h:1");
  std::string huge = "GET / HTTP/1.1\r\nX: " + std::string(HostRewriter::kMaxHeaderBytes, 'a');
  EXPECT_EQ(run(big, huge, 1000), huge);
  EXPECT_TRUE(big.passthrough());
  EXPECT_EQ(run("POST / HTTP/1.1\r\nContent-Length: nope\r\n\r\n"), "POST / HTTP/1.1\r\nContent-Length: nope\r\n\r\n");
}

TEST(HostRewriter, BodyBytesFlowBeforeTheyAreComplete) {
  HostRewriter r("h:1");
  std::string out;
  std::string head = "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
  r.feed(std::span(reinterpret_cast<const std::uint8_t*>(head.data()), head.size()), out);
  out.clear();
  std::string part = "abc";
  r.feed(std::span(reinterpret_cast<const std::uint8_t*>(part.data()), part.size()), out);
  EXPECT_EQ(out, "abc");  // not held back until the body is complete
}

}  // namespace
}  // namespace runsnack
