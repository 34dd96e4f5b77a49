// Abandoned connections: counted per address, one "abandon" record per address and interval.
#include "provider/abandoned_connections.hpp"

#include "provider/admission_audit.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <gtest/gtest.h>

#include <algorithm>

namespace runsnack {
namespace {

using namespace std::chrono_literals;

TEST(AbandonTally, CountedPerAddressAndWrittenWhenTheIntervalEnds) {
  AbandonTally tally(60s);
  TimePoint t0 = from_unix(1'800'000'000);
  for (int i = 0; i < 5; ++i) tally.note(t0 + std::chrono::seconds(i), "127.0.0.1", "direct");
  tally.note(t0 + 1s, "192.0.2.7", "relayed");
  EXPECT_TRUE(tally.due(t0 + 30s).empty());
  auto due = tally.due(t0 + 61s);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].address, "127.0.0.1");
  EXPECT_EQ(due[0].decision, "abandon");
  EXPECT_EQ(due[0].kind, "connect");
  EXPECT_EQ(due[0].detail["count"], 5);
  EXPECT_EQ(due[0].detail["path"], "direct");
  EXPECT_EQ(due[1].detail["count"], 1);
  EXPECT_EQ(due[1].reason.rfind("1 connection closed by the peer", 0), 0u) << due[1].reason;
  EXPECT_TRUE(tally.due(t0 + 200s, true).empty());  // written once
}

TEST(AbandonTally, AddressesAreBounded) {
  AbandonTally tally(60s);
  TimePoint t0 = from_unix(1'800'000'000);
  for (std::size_t i = 0; i < kMaxTallyAddresses + 10; ++i) tally.note(t0, "10.1.0." + std::to_string(i), "direct");
  auto due = tally.due(t0, true);
  ASSERT_EQ(due.size(), kMaxTallyAddresses + 1);
  auto other = std::find_if(due.begin(), due.end(), [](const AuditEvent& e) { return e.address == "(other addresses)"; });
  ASSERT_NE(other, due.end());
  EXPECT_EQ(other->detail["count"], 10);
}

TEST(ClosedByPeer, OnlyThePeerGoingAway) {
  EXPECT_TRUE(closed_by_peer(boost::asio::error::eof));
  EXPECT_TRUE(closed_by_peer(boost::asio::error::connection_reset));
  EXPECT_TRUE(closed_by_peer(boost::asio::ssl::error::stream_truncated));
  EXPECT_FALSE(closed_by_peer(boost::asio::error::operation_aborted));
  EXPECT_FALSE(closed_by_peer(boost::system::error_code(336130315, boost::asio::error::get_ssl_category())));
}

}  // namespace
}  // namespace runsnack
