#include "store/audit_log.hpp"

#include <gtest/gtest.h>

#include "store/schema.hpp"
#include "store/temp_dir_for_test.hpp"

namespace runsnack {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = from_unix(1'800'000'000);

AuditEvent event(TimePoint t, std::string kind, std::string decision = "") {
  AuditEvent e;
  e.time = t;
  e.kind = std::move(kind);
  e.grant_id = "AAAAAAAAAA";
  e.peer = "PEER";
  e.address = "203.0.113.7:41234";
  e.decision = std::move(decision);
  return e;
}

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Database::open(":memory:");
    ASSERT_TRUE(opened) << opened.error().what();
    db.emplace(std::move(*opened));
    log.emplace(*db);
  }
  std::optional<Database> db;
  std::optional<AuditLog> log;
};

TEST_F(AuditLogTest, AppendAndQueryRoundTrip) {
  AuditEvent e = event(kT0, "refused", "refuse");
  e.reason = "link expired";
  e.detail = {{"service", "info"}, {"n", 3}};
  ASSERT_TRUE(log->append(e));
  auto got = log->query(std::nullopt, 10);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 1u);
  const AuditEvent& g = got->front();
  EXPECT_EQ(g.time, e.time);
  EXPECT_EQ(g.kind, "refused");
  EXPECT_EQ(g.grant_id, e.grant_id);
  EXPECT_EQ(g.peer, e.peer);
  EXPECT_EQ(g.address, e.address);
  EXPECT_EQ(g.decision, "refuse");
  EXPECT_EQ(g.reason, e.reason);
  EXPECT_EQ(g.detail, e.detail);
}

TEST_F(AuditLogTest, SinceAndLimitKeepTheLatestInOrder) {
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(log->append(event(kT0 + std::chrono::seconds(i), "k" + std::to_string(i))));
  auto since = log->query(kT0 + 7s, 100);
  ASSERT_TRUE(since);
  ASSERT_EQ(since->size(), 3u);
  EXPECT_EQ((*since)[0].kind, "k7");
  EXPECT_EQ((*since)[2].kind, "k9");

  auto latest = log->query(std::nullopt, 2);
  ASSERT_TRUE(latest);
  ASSERT_EQ(latest->size(), 2u);
  EXPECT_EQ((*latest)[0].kind, "k8");
  EXPECT_EQ((*latest)[1].kind, "k9");

  EXPECT_TRUE(log->query(std::nullopt, 0)->empty());
  EXPECT_EQ(log->query(std::nullopt, std::size_t(-1))->size(), 10u);
}

TEST_F(AuditLogTest, BatchAppendWritesAllInOrder) {
  ASSERT_TRUE(log->append(event(kT0, "first")));
  std::vector<AuditEvent> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(event(kT0 + std::chrono::seconds(i), "b" + std::to_string(i), "accept"));
  batch[2].detail = {{"bytes", 42}};
  ASSERT_TRUE(log->append(std::span<const AuditEvent>(batch)));
  ASSERT_TRUE(log->append(std::span<const AuditEvent>()));  // nothing to write is fine
  auto got = log->query(std::nullopt, 100);
  ASSERT_TRUE(got);
  std::vector<std::string> kinds;
  for (const auto& e : *got) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"first", "b0", "b1", "b2", "b3", "b4"}));
  EXPECT_EQ((*got)[3].detail, (nlohmann::json{{"bytes", 42}}));
  EXPECT_EQ((*got)[3].decision, "accept");
}

TEST_F(AuditLogTest, PeerTextIsBounded) {
  AuditEvent e = event(kT0, "connect");
  e.peer = std::string(10'000, 'p');
  e.address = std::string("bad\xff\xfe utf8\nnewline");
  e.reason = std::string(5000, 'r');
  e.detail = {{"blob", std::string(10'000, 'x')}};
  ASSERT_TRUE(log->append(e));
  auto got = log->query(std::nullopt, 1);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 1u);
  const AuditEvent& g = got->front();
  EXPECT_EQ(g.peer.size(), kAuditFieldMaxBytes);
  EXPECT_EQ(g.address, "bad?? utf8?newline");
  EXPECT_EQ(g.reason.size(), kAuditReasonMaxBytes);
  EXPECT_EQ(g.detail["truncated"], true);
  // The whole event serializes without throwing.
  nlohmann::json j = g;
  EXPECT_NO_THROW((void)j.dump());
}

TEST_F(AuditLogTest, DetailWithInvalidUtf8DoesNotThrow) {
  AuditEvent e = event(kT0, "service");
  e.detail = {{"arg", std::string("\xc3\x28")}};
  ASSERT_TRUE(log->append(e));
  auto got = log->query(std::nullopt, 1);
  ASSERT_TRUE(got);
  EXPECT_TRUE((*got)[0].detail.is_object());
}

TEST(AuditLogJson, HasStableKeys) {
  AuditEvent e = event(kT0, "session_open", "accept");
  nlohmann::json j = e;
  EXPECT_EQ(j["time"], rfc3339(kT0));
  EXPECT_EQ(j["kind"], "session_open");
  EXPECT_EQ(j["decision"], "accept");
  EXPECT_EQ(to_json(e), j);
  for (const char* key : {"grant_id", "peer", "address", "reason", "detail"})
    EXPECT_TRUE(j.contains(key)) << key;
}

TEST(AuditLogFile, SurvivesReopen) {
  testing::TempDir dir;
  auto path = dir.path() / kStoreFileName;
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db);
    AuditLog log(*db);
    ASSERT_TRUE(log.append(event(kT0, "connect")));
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db);
  AuditLog log(*db);
  ASSERT_TRUE(log.append(event(kT0 + 1s, "revoke")));
  auto got = log.query(std::nullopt, 10);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].kind, "connect");
  EXPECT_EQ((*got)[1].kind, "revoke");
}

TEST_F(AuditLogTest, PruneByAgeThenByRows) {
  for (int day = 0; day < 10; ++day)
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(log->append(event(kT0 + std::chrono::hours(24 * day) + std::chrono::seconds(i), "connect")));
  ASSERT_EQ(log->count().value(), 30);
  // Older than day 4: days 0..3 go.
  auto gone = log->prune(kT0 + std::chrono::hours(24 * 4), std::nullopt);
  ASSERT_TRUE(gone) << gone.error().what();
  EXPECT_EQ(*gone, 12);
  EXPECT_EQ(log->count().value(), 18);
  // Keep the newest 5.
  gone = log->prune(std::nullopt, 5);
  ASSERT_TRUE(gone);
  EXPECT_EQ(*gone, 13);
  auto left = log->query(std::nullopt, 100).value();
  ASSERT_EQ(left.size(), 5u);
  EXPECT_EQ(left.back().time, kT0 + std::chrono::hours(24 * 9) + std::chrono::seconds(2));
  EXPECT_EQ(log->prune(std::nullopt, 5).value(), 0);  // nothing more to do
  EXPECT_EQ(log->prune(std::nullopt, 0).value(), 5);
  EXPECT_EQ(log->count().value(), 0);
}

}  // namespace
}  // namespace runsnack
