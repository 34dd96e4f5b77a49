// Live sessions as other processes see them: add, services, kick, left-overs of dead providers.
#include "store/session_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>

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

CommandRow command(std::string session, std::string text, std::int64_t provider_pid) {
  CommandRow c;
  c.session_id = std::move(session);
  c.command = std::move(text);
  c.started = from_unix(1'800'000'001);
  c.pid = 4242;
  c.cgroup = "/sys/fs/cgroup/runsnack-x";
  c.provider_pid = provider_pid;
  return c;
}

bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(SessionStore, CommandsAreListedUnderTheirSessionAndRemoved) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  SessionStore store(*db);
  ASSERT_TRUE(store.add(row("s1", ::getpid())));
  ASSERT_TRUE(store.add(row("s2", ::getpid())));
  auto a = store.add_command(command("s1", "python3 -c burn", ::getpid()));
  auto b = store.add_command(command("s2", "sleep 60", ::getpid()));
  ASSERT_TRUE(a && b);
  EXPECT_GT(*a, 0);
  EXPECT_GT(*b, 0);
  auto live = store.live();
  ASSERT_TRUE(live);
  ASSERT_EQ(live->size(), 2u);
  ASSERT_EQ((*live)[0].commands.size(), 1u);
  const CommandRow& c = (*live)[0].commands[0];
  EXPECT_EQ(c.command, "python3 -c burn");
  EXPECT_EQ(c.pid, 4242);
  EXPECT_EQ(c.cgroup, "/sys/fs/cgroup/runsnack-x");
  EXPECT_EQ(to_unix(c.started), 1'800'000'001);
  EXPECT_EQ((*live)[1].commands[0].command, "sleep 60");
  ASSERT_TRUE(store.remove_command(*a, "s1"));
  live = store.live();
  EXPECT_TRUE((*live)[0].commands.empty());
  EXPECT_EQ((*live)[1].commands.size(), 1u);
}

TEST(SessionStore, CommandRowsPerSessionAreBoundedAndTheRestCounted) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  SessionStore store(*db);
  ASSERT_TRUE(store.add(row("s1", ::getpid())));
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < kMaxSessionCommands + 8; ++i) {
    auto id = store.add_command(command("s1", "c" + std::to_string(i), ::getpid()));
    ASSERT_TRUE(id);
    ids.push_back(*id);
  }
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 8);
  auto live = store.live();
  ASSERT_TRUE(live);
  EXPECT_EQ((*live)[0].commands.size(), kMaxSessionCommands);
  EXPECT_EQ((*live)[0].unlisted_commands, 8);
  ASSERT_TRUE(store.remove_command(0, "s1"));
  ASSERT_TRUE(store.remove_command(ids[0], "s1"));
  live = store.live();
  EXPECT_EQ((*live)[0].commands.size(), kMaxSessionCommands - 1);
  EXPECT_EQ((*live)[0].unlisted_commands, 7);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(store.remove_command(0, "s1"));
  EXPECT_EQ(store.live()->at(0).unlisted_commands, 0);  // never below zero
}

TEST(SessionStore, LongCommandLinesAreCutAtACharacter) {
  const std::string huge(100 * 1024, 'x');
  const std::string line = short_command_line({"python3", "-c", huge});
  EXPECT_LE(line.size(), kMaxCommandText);
  EXPECT_TRUE(line.starts_with("python3 -c xxx"));
  EXPECT_TRUE(line.ends_with("\u2026"));
  EXPECT_EQ(short_command_line({"echo", "hi"}), "echo hi");
  // Two-byte characters across the cut: never half of one.
  std::string accents;
  for (int i = 0; i < 300; ++i) accents += "\u00e9";
  for (std::size_t shift = 0; shift < 4; ++shift) {
    const std::string cut = short_command_line({std::string(shift, 'a'), accents});
    EXPECT_LE(cut.size(), kMaxCommandText);
    EXPECT_TRUE(valid_utf8(cut)) << shift;
  }
  // The store cuts what it is given too.
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  SessionStore store(*db);
  ASSERT_TRUE(store.add(row("s1", ::getpid())));
  ASSERT_TRUE(store.add_command(command("s1", huge, ::getpid())));
  auto live = store.live();
  ASSERT_TRUE(live);
  EXPECT_LE((*live)[0].commands.at(0).command.size(), kMaxCommandText);
}

TEST(SessionStore, CommandsOfDeadProvidersArePrunedAndNotListed) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  SessionStore store(*db);
  const std::int64_t dead = dead_pid();
  ASSERT_TRUE(store.add(row("orphan", dead)));
  ASSERT_TRUE(store.add_command(command("orphan", "left over", dead)));
  ASSERT_TRUE(store.add_command(command("gone-session", "lost", ::getpid())));
  EXPECT_TRUE(store.live()->empty());
  ASSERT_TRUE(store.prune_dead());
  auto stmt = db->prepare("SELECT count(*) FROM session_commands");
  ASSERT_TRUE(stmt);
  ASSERT_TRUE(stmt->step());
  EXPECT_EQ(stmt->column_int64(0), 1);  // the live provider's row stays until its command ends
}

}  // namespace
}  // namespace runsnack
