// Unproven refusals: the first from an address at once, the rest as one counted record per interval.
#include "provider/admission_audit.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace runsnack {
namespace {

using namespace std::chrono_literals;

AuditEvent refusal(TimePoint t, const std::string& address, const std::string& reason) {
  return AuditEvent{t, "connect", "", "", address, "refuse", reason, nullptr};
}

TEST(RefusalTally, FirstAtOnceThenOneCountedRecordPerInterval) {
  RefusalTally tally(60s);
  TimePoint t0 = from_unix(1'800'000'000);
  auto first = tally.note(refusal(t0, "192.0.2.9:4000", "TLS handshake failed: x"), "192.0.2.9");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->address, "192.0.2.9:4000");
  for (int i = 1; i < 3000; ++i)
    EXPECT_FALSE(tally.note(refusal(t0 + std::chrono::milliseconds(i), "192.0.2.9:" + std::to_string(4000 + i),
                                    i % 2 ? "TLS handshake failed: x" : "TLS handshake timed out"),
                            "192.0.2.9"));
  EXPECT_TRUE(tally.due(t0 + 30s).empty());  // the interval is not over
  auto due = tally.due(t0 + 61s);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].address, "192.0.2.9");
  EXPECT_EQ(due[0].detail["count"], 2999);
  EXPECT_EQ(due[0].detail["reasons"]["TLS handshake timed out"], 1499);
  EXPECT_EQ(due[0].detail["reasons"]["TLS handshake failed: x"], 1500);
  // A new interval: the next one is written at once again.
  EXPECT_TRUE(tally.note(refusal(t0 + 62s, "192.0.2.9:1", "x"), "192.0.2.9"));
}

TEST(RefusalTally, AddressesAreTalliedApartAndBounded) {
  RefusalTally tally(60s);
  TimePoint t0 = from_unix(1'800'000'000);
  for (std::size_t i = 0; i < kMaxTallyAddresses + 50; ++i) {
    std::string a = "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256);
    tally.note(refusal(t0, a + ":1", "r"), a);
    tally.note(refusal(t0, a + ":2", "r"), a);
  }
  auto due = tally.due(t0, /*all=*/true);
  ASSERT_EQ(due.size(), kMaxTallyAddresses + 1);  // one per tracked address, one for the rest
  auto other = std::find_if(due.begin(), due.end(), [](const AuditEvent& e) { return e.address == "(other addresses)"; });
  ASSERT_NE(other, due.end());
  EXPECT_EQ(other->detail["count"], 100);
}

TEST(RefusalTally, LongReasonsKeepTheDetailSmall) {
  RefusalTally tally(60s);
  TimePoint t0 = from_unix(1'800'000'000);
  for (int i = 0; i < 40; ++i) tally.note(refusal(t0, "a:1", std::string(3000, 'a' + i % 26)), "a");
  auto due = tally.due(t0, true);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].detail["count"], 39);
  EXPECT_LT(due[0].detail.dump().size(), kAuditDetailMaxBytes);
}

}  // namespace
}  // namespace runsnack
