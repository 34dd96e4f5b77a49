// Live sessions as other processes see them: add, services, kick, left-overs of dead providers.
#include "store/session_store.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

namespace runsnack {
namespace {

SessionRow row(std::string id, std::int64_t pid) {
  SessionRow s;
  s.id = std::move(id);
  s.grant_id = "g1";
  s.peer = "peer";
  s.address = "127.0.0.1:5000";
  s.path = "direct";
  s.opened = from_unix(1'800'000'000);
  s.pid = pid;
  return s;
}

std::int64_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(SessionStore, LiveSessionsServicesAndKick) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db) << db.error().what();
  SessionStore store(*db);
  ASSERT_TRUE(store.add(row("s1", ::getpid())));
  ASSERT_TRUE(store.note_service("s1", "info"));
  ASSERT_TRUE(store.note_service("s1", "run"));
  ASSERT_TRUE(store.note_service("s1", "info"));
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(store.note_service("s1", "x" + std::to_string(i)));
  auto live = store.live();
  ASSERT_TRUE(live);
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].services.size(), kMaxSessionServices);
  EXPECT_EQ((*live)[0].services[0], "info");
  EXPECT_EQ((*live)[0].services[1], "run");
  EXPECT_FALSE((*live)[0].kicked);

  auto none = store.kick("nope");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  auto kicked = store.kick("s1");
  ASSERT_TRUE(kicked && *kicked);
  auto ids = store.kicked(::getpid());
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, std::vector<std::string>{"s1"});
  ASSERT_TRUE(store.remove("s1"));
  EXPECT_TRUE(store.live()->empty());
}

TEST(SessionStore, RowsOfDeadProvidersAreLeftOutAndPruned) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  SessionStore store(*db);
  ASSERT_TRUE(store.add(row("alive", ::getpid())));
  ASSERT_TRUE(store.add(row("orphan", dead_pid())));
  auto live = store.live();
  ASSERT_TRUE(live);
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id, "alive");
  auto kicked = store.kick("orphan");
  ASSERT_TRUE(kicked);
  EXPECT_FALSE(*kicked);  // not live: nothing to kick
  auto gone = store.prune_dead();
  ASSERT_TRUE(gone);
  EXPECT_EQ(*gone, 1);
}

}  // namespace
}  // namespace runsnack
