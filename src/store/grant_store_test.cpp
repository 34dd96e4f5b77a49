#include "store/grant_store.hpp"

#include <gtest/gtest.h>

#include <thread>

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
  g.uses = 2;
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
  EXPECT_EQ(a.uses, b.uses);
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
  Grant used_up = minimal_grant("USEDUP0000");
  used_up.created = kT0 + 3s;
  used_up.max_uses = 1;
  for (const auto& g : {live, revoked, expired, used_up}) ASSERT_TRUE(store->create(g));
  ASSERT_TRUE(*store->revoke("REVOKED000"));

  auto all = store->list(true);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].id, "LIVE000000");  // oldest first
  EXPECT_EQ((*all)[3].id, "USEDUP0000");

  auto alive = store->list(false);
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->size(), 3u);  // expired one not yet: the clock is before its expiry

  ASSERT_TRUE(*store->record_use("USEDUP0000", "P", clock.now()));
  clock.advance(10s);
  alive = store->list(false);
  ASSERT_TRUE(alive);
  ASSERT_EQ(alive->size(), 1u);
  EXPECT_EQ((*alive)[0].id, "LIVE000000");
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

TEST_F(GrantStoreTest, RecordUseHonoursMaxUses) {
  Grant g = minimal_grant("AAAAAAAAAA");
  g.max_uses = 2;
  ASSERT_TRUE(store->create(g));
  EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P1", clock.now()));
  EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P2", clock.now()));
  EXPECT_FALSE(*store->record_use("AAAAAAAAAA", "P3", clock.now()));
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->uses, 2);
  EXPECT_FALSE((*store->find("AAAAAAAAAA"))->bound_peer);  // not bind_first
}

TEST_F(GrantStoreTest, RecordUseUnlimitedAndUnknown) {
  ASSERT_TRUE(store->create(minimal_grant("AAAAAAAAAA")));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(*store->record_use("AAAAAAAAAA", "P", clock.now()));
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->uses, 10);
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
  EXPECT_EQ((*store->find("AAAAAAAAAA"))->uses, 2);
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
    won += *a.record_use("LIMITED000", "P", kT0) ? 1 : 0;
    won += *b.record_use("LIMITED000", "P", kT0) ? 1 : 0;
  }
  EXPECT_EQ(won, 3);
  EXPECT_EQ((*b.find("LIMITED000"))->uses, 3);

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
  EXPECT_EQ((*got)->uses, g.uses + 1);
  EXPECT_EQ((*got)->bound_peer, "FIRST");
  EXPECT_EQ((*got)->services, g.services);
}

}  // namespace
}  // namespace runsnack
