#include "store/grant_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "store/migrate.hpp"
#include "store/schema.hpp"
#include "store/temp_dir_for_test.hpp"

namespace runsnack {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = from_unix(1'800'000'000);

Grant minimal_grant(std::string id) {
  Grant g;
  g.id = std::move(id);
  g.key.fill(0xAB);
  g.created = kT0;
  return g;
}

Grant full_grant(std::string id) {
  Grant g = minimal_grant(std::move(id));
  for (std::size_t i = 0; i < g.key.size(); ++i) g.key[i] = static_cast<std::uint8_t>(i * 7);
  g.expires = kT0 + 3600s;
  g.max_uses = 5;
  g.consumers = 1;
  g.connections = 2;
  g.max_sessions = 3;
  g.bandwidth_bytes_per_s = 1'000'000;
  g.services = {"info", "run", "forward:11434"};
  g.gpus = {0, 2};
  g.bind_first = true;
  g.bound_peer = "PEERAAAA";
  g.revoked = false;
  g.label = "for Ana, \"quoted\", ünïcode";
  g.terms = {{"forward", {{"targets", {"127.0.0.1:11434"}}}}};
  return g;
}

void expect_same(const Grant& a, const Grant& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.created, b.created);
  EXPECT_EQ(a.expires, b.expires);
  EXPECT_EQ(a.max_uses, b.max_uses);
  EXPECT_EQ(a.consumers, b.consumers);
  EXPECT_EQ(a.connections, b.connections);
  EXPECT_EQ(a.max_sessions, b.max_sessions);
  EXPECT_EQ(a.bandwidth_bytes_per_s, b.bandwidth_bytes_per_s);
  EXPECT_EQ(a.services, b.services);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.bind_first, b.bind_first);
  EXPECT_EQ(a.bound_peer, b.bound_peer);
  EXPECT_EQ(a.revoked, b.revoked);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.terms, b.terms);
}

class GrantStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Database::open(":memory:");
    ASSERT_TRUE(opened) << opened.error().what();
    db.emplace(std::move(*opened));
    store.emplace(*db, clock);
  }
  ManualClock clock{kT0};
  std::optional<Database> db;
  std::optional<GrantStore> store;
};

TEST_F(GrantStoreTest, RoundTripsEveryField) {
  Grant full = full_grant("AAAAAAAAAA");
  Grant minimal = minimal_grant("BBBBBBBBBB");
  minimal.services.clear();  // no services at all is representable too
  ASSERT_TRUE(store->create(full));
  ASSERT_TRUE(store->create(minimal));

  auto got = store->find("AAAAAAAAAA");
  ASSERT_TRUE(got && *got);
  expect_same(**got, full);
  got = store->find("BBBBBBBBBB");
  ASSERT_TRUE(got && *got);
  expect_same(**got, minimal);

  auto none = store->find("CCCCCCCCCC");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

TEST_F(GrantStoreTest, DuplicateIdRefused) {
  ASSERT_TRUE(store->create(minimal_grant("AAAAAAAAAA")));
  auto again = store->create(minimal_grant("AAAAAAAAAA"));
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().is(errc::invalid_argument));
}

TEST_F(GrantStoreTest, ListLeavesOutDeadUnlessAsked) {
  Grant live = minimal_grant("LIVE000000");
  Grant revoked = minimal_grant("REVOKED000");
  revoked.created = kT0 + 1s;
  Grant expired = minimal_grant("EXPIRED000");
  expired.created = kT0 + 2s;
  expired.expires = kT0 + 10s;
  Grant full = minimal_grant("FULL000000");
  full.created = kT0 + 3s;
  full.max_uses = 1;
  for (const auto& g : {live, revoked, expired, full}) ASSERT_TRUE(store->create(g));
  ASSERT_TRUE(*store->revoke("REVOKED000"));

  auto all = store->list(true);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].id, "LIVE000000");  // oldest first
  EXPECT_EQ((*all)[3].id, "FULL000000");

  auto alive = store->list(false);
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->size(), 3u);  // expired one not yet: the clock is before its expiry

  ASSERT_TRUE(*store->record_use("FULL000000", "P", clock.now()));
  clock.advance(10s);
  alive = store->list(false);
  ASSERT_TRUE(alive);
  ASSERT_EQ(alive->size(), 2u);  // a full link lives on for its consumers
  EXPECT_EQ((*alive)[0].id, "LIVE000000");
  EXPECT_EQ((*alive)[1].id, "FULL000000");
}

TEST_F(GrantStoreTest, Revoke) {
  ASSERT_TRUE(store->create(minimal_grant("AAAAAAAAAA")));
  EXPECT_TRUE(*store->revoke("AAAAAAAAAA"));
  EXPECT_TRUE(*store->revoke("AAAAAAAAAA"));  // idempotent
  EXPECT_TRUE((*store->find("AAAAAAAAAA"))->revoked);
  auto missing = store->revoke("ZZZZZZZZZZ");
  ASSERT_TRUE(missing);
  EXPECT_FALSE(*missing);
  EXPECT_FALSE(*store->record_use("AAAAAAAAAA", "P", clock.now()));
}

TEST_F(GrantStoreTest, MaxUsesCountsConsumers) {
  Grant g = minimal_grant("AAAAAAAAAA");
  g.max_uses = 2;
  ASSERT_TRUE(store->create(g));
  for (int i = 0; i < 5; ++i) {  // each as often as it likes
    EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P1", clock.now()));
    EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P2", clock.now()));
  }
  EXPECT_FALSE(*store->record_use("AAAAAAAAAA", "P3", clock.now()));
  EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P1", clock.now()));  // after the refusal too
  auto got = *store->find("AAAAAAAAAA");
  EXPECT_EQ(got->consumers, 2);
  EXPECT_EQ(got->connections, 11);
  EXPECT_FALSE(got->bound_peer);  // not bind_first
  // first_seen is the first use's time.
  auto first = db->prepare("SELECT peer_id, first_seen FROM grant_consumers WHERE grant_id = 'AAAAAAAAAA' ORDER BY peer_id");
  ASSERT_TRUE(first);
  auto rows = read_rows(*first, [](Statement& r) { return std::pair{r.column_text(0), r.column_int64(1)}; });
  ASSERT_TRUE(rows);
  EXPECT_EQ(*rows, (std::vector<std::pair<std::string, std::int64_t>>{{"P1", to_unix(kT0)}, {"P2", to_unix(kT0)}}));
}

TEST_F(GrantStoreTest, ARefusedUseCountsNothing) {
  Grant g = minimal_grant("AAAAAAAAAA");
  g.bind_first = true;
  g.max_uses = 5;
  ASSERT_TRUE(store->create(g));
  EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "FIRST", clock.now()));
  EXPECT_FALSE(*store->record_use("AAAAAAAAAA", "OTHER", clock.now()));
  ASSERT_TRUE(*store->revoke("AAAAAAAAAA"));
  EXPECT_FALSE(*store->record_use("AAAAAAAAAA", "THIRD", clock.now()));
  auto got = *store->find("AAAAAAAAAA");
  EXPECT_EQ((std::pair{got->consumers, got->connections}), (std::pair<std::int64_t, std::int64_t>{1, 1}));
}

TEST_F(GrantStoreTest, RecordUseUnlimitedAndUnknown) {
  ASSERT_TRUE(store->create(minimal_grant("AAAAAAAAAA")));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P" + std::to_string(i % 4), clock.now()));
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->connections, 10);
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->consumers, 4);
  EXPECT_FALSE(*store->record_use("NOSUCHGRNT", "P", clock.now()));
}

TEST_F(GrantStoreTest, RecordUseHonoursExpiryLikeCheckGrant) {
  Grant g = minimal_grant("AAAAAAAAAA");
  g.expires = kT0 + 10s;
  ASSERT_TRUE(store->create(g));
  EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P", kT0 + 9s));
  EXPECT_FALSE(*store->record_use("AAAAAAAAAA", "P", kT0 + 10s));  // expiry is exclusive, as in check_grant
}

TEST_F(GrantStoreTest, RecordUseBindsFirstPeer) {
  Grant g = minimal_grant("AAAAAAAAAA");
  g.bind_first = true;
  ASSERT_TRUE(store->create(g));
  EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "FIRST", clock.now()));
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->bound_peer, "FIRST");
  EXPECT_FALSE(*store->record_use("AAAAAAAAAA", "SECOND", clock.now()));
  EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "FIRST", clock.now()));
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->connections, 2);
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->consumers, 1);
}

TEST_F(GrantStoreTest, MalformedRowIsAnError) {
  ASSERT_TRUE(store->create(minimal_grant("AAAAAAAAAA")));
  ASSERT_TRUE(db->exec("UPDATE grants SET services = 'not json'"));
  auto got = store->find("AAAAAAAAAA");
  ASSERT_FALSE(got);
  EXPECT_TRUE(got.error().is(errc::malformed));
}

// Two processes (here: two connections) admitting the same link.
TEST(GrantStoreShared, TwoConnectionsShareUsesAndBinding) {
  testing::TempDir dir;
  auto path = dir.path() / kStoreFileName;
  auto db_a = Database::open(path);
  auto db_b = Database::open(path);
  ASSERT_TRUE(db_a && db_b);
  GrantStore a(*db_a);
  GrantStore b(*db_b);

  Grant limited = minimal_grant("LIMITED000");
  limited.max_uses = 3;
  ASSERT_TRUE(a.create(limited));
  int won = 0;
  for (int i = 0; i < 5; ++i) {
    won += *a.record_use("LIMITED000", "A" + std::to_string(i), kT0) ? 1 : 0;
    won += *b.record_use("LIMITED000", "B" + std::to_string(i), kT0) ? 1 : 0;
  }
  EXPECT_EQ(won, 3);
  EXPECT_EQ((*b.find("LIMITED000"))->consumers, 3);
  EXPECT_TRUE(*b.record_use("LIMITED000", "A0", kT0));  // one of the three, through the other connection

  Grant bound = minimal_grant("BOUND00000");
  bound.bind_first = true;
  ASSERT_TRUE(b.create(bound));
  EXPECT_TRUE(*b.record_use("BOUND00000", "FIRST", kT0));
  EXPECT_FALSE(*a.record_use("BOUND00000", "OTHER", kT0));
  EXPECT_TRUE(*a.record_use("BOUND00000", "FIRST", kT0));

  // `runsnack revoke` from another process is seen at once.
  EXPECT_TRUE(*b.revoke("LIMITED000"));
  EXPECT_TRUE((*a.find("LIMITED000"))->revoked);
}

// New consumers racing for the last places from two processes (here: threads
// with a connection each): exactly max_uses of them win.
TEST(GrantStoreShared, RacingNewConsumersTakeExactlyMaxUses) {
  testing::TempDir dir;
  auto path = dir.path() / kStoreFileName;
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db);
    Grant g = minimal_grant("RACE000000");
    g.max_uses = 7;
    ASSERT_TRUE(GrantStore(*db).create(g));
  }
  std::atomic<int> won{0};
  auto racer = [&](const std::string& side) {
    auto db = Database::open(path);
    ASSERT_TRUE(db);
    GrantStore store(*db);
    for (int i = 0; i < 20; ++i) {
      auto used = store.record_use("RACE000000", side + std::to_string(i), kT0);
      ASSERT_TRUE(used) << used.error().what();
      won += *used ? 1 : 0;
    }
  };
  std::thread a(racer, "A"), b(racer, "B");
  a.join();
  b.join();
  EXPECT_EQ(won.load(), 7);
  auto db = Database::open(path);
  ASSERT_TRUE(db);
  auto got = *GrantStore(*db).find("RACE000000");
  EXPECT_EQ(got->consumers, 7);
  EXPECT_EQ(got->connections, 7);
}

// A writer that holds the lock makes the other wait (busy timeout), not fail.
TEST(GrantStoreShared, WaitsForOtherWriter) {
  testing::TempDir dir;
  auto path = dir.path() / kStoreFileName;
  auto db_a = Database::open(path);
  auto db_b = Database::open(path);
  ASSERT_TRUE(db_a && db_b);
  GrantStore b(*db_b);
  ASSERT_TRUE(b.create(minimal_grant("AAAAAAAAAA")));

  std::thread holder([&] {
    auto tx = Transaction::begin(*db_a);
    ASSERT_TRUE(tx);
    std::this_thread::sleep_for(300ms);
    ASSERT_TRUE(tx->commit());
  });
  std::this_thread::sleep_for(50ms);
  auto used = b.record_use("AAAAAAAAAA", "P", kT0);
  holder.join();
  ASSERT_TRUE(used) << used.error().what();
  EXPECT_TRUE(*used);
}

// A provider restart keeps grants, uses and the binding.
TEST(GrantStoreShared, SurvivesReopen) {
  testing::TempDir dir;
  auto path = dir.path() / kStoreFileName;
  Grant g = full_grant("AAAAAAAAAA");
  g.bound_peer.reset();
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db);
    GrantStore store(*db);
    ASSERT_TRUE(store.create(g));
    ASSERT_TRUE(*store.record_use("AAAAAAAAAA", "FIRST", kT0));
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db);
  GrantStore store(*db);
  auto got = store.find("AAAAAAAAAA");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->connections, g.connections + 1);
  EXPECT_EQ((*got)->consumers, g.consumers + 1);
  EXPECT_EQ((*got)->bound_peer, "FIRST");
  EXPECT_EQ((*got)->services, g.services);
}

}  // namespace
}  // namespace runsnack

namespace runsnack {
namespace {

// Issue 39's migration: --max-uses counted connections in `uses`; now it
// counts consumers, found for existing grants in the audit log's accepts.
TEST(GrantStoreMigration, ConsumersOfExistingGrantsComeFromTheAuditLog) {
  testing::TempDir dir;
  auto path = dir.path() / kStoreFileName;
  {
    auto db = Database::open_unmigrated(path);
    ASSERT_TRUE(db);
    auto before = store_migrations().first(4);  // the schema runsnack 0.1 wrote
    ASSERT_EQ(before.back().version, 4);
    ASSERT_TRUE(migrate(*db, before));
    ASSERT_TRUE(db->exec(
        "INSERT INTO grants (id, key, created, max_uses, uses, services, gpus, bind_first, bound_peer) VALUES"
        " ('USEDUP0000', zeroblob(32), 100, 3, 3, '[\"info\"]', '[]', 0, NULL),"
        " ('BOUND00000', zeroblob(32), 100, NULL, 1, '[\"info\"]', '[]', 1, 'PB');"
        "INSERT INTO audit (time, kind, grant_id, peer, address, decision, reason, detail) VALUES"
        " (200, 'auth', 'USEDUP0000', 'PA', '', 'accept', '', '{}'),"
        " (150, 'auth', 'USEDUP0000', 'PA', '', 'accept', '', '{}'),"
        " (300, 'auth', 'USEDUP0000', 'PC', '', 'accept', '', '{}'),"
        " (400, 'auth', 'USEDUP0000', 'PD', '', 'refuse', 'link used up', '{}'),"
        " (400, 'service', 'USEDUP0000', 'PE', '', 'accept', '', '{}'),"
        " (500, 'auth', 'GONE000000', 'PF', '', 'accept', '', '{}');"));
  }
  auto db = Database::open(path);  // migrates
  ASSERT_TRUE(db) << db.error().what();
  GrantStore store(*db);
  auto used_up = *store.find("USEDUP0000");
  EXPECT_EQ(used_up->consumers, 2);    // PA and PC
  EXPECT_EQ(used_up->connections, 3);  // the old count, kept
  EXPECT_EQ((*store.find("BOUND00000"))->consumers, 1);  // the bound peer, with no accept left in the log
  // The old count had used the link up; its consumers still get in, and one more person.
  EXPECT_TRUE(*store.record_use("USEDUP0000", "PA", kT0));
  EXPECT_TRUE(*store.record_use("USEDUP0000", "PD", kT0));
  EXPECT_FALSE(*store.record_use("USEDUP0000", "PE", kT0));
  auto first = db->prepare("SELECT first_seen FROM grant_consumers WHERE grant_id = 'USEDUP0000' AND peer_id = 'PA'");
  ASSERT_TRUE(first && *first->step());
  EXPECT_EQ(first->column_int64(0), 150);
}

}  // namespace
}  // namespace runsnack
