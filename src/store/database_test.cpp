#include "store/database.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "store/db_connection.hpp"
#include "store/migrate.hpp"
#include "store/schema.hpp"
#include "store/temp_dir_for_test.hpp"

namespace runsnack {
namespace {

unsigned file_mode(const std::filesystem::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 0777;
}

TEST(Database, OpensInMemoryAndRunsStatements) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db) << db.error().what();
  ASSERT_TRUE(db->exec("CREATE TABLE t (a INTEGER, b TEXT, c BLOB)"));
  auto ins = db->prepare("INSERT INTO t VALUES (?1, ?2, ?3)");
  ASSERT_TRUE(ins);
  std::vector<std::uint8_t> blob{0, 1, 2, 255};
  ASSERT_TRUE(ins->bind(1, std::int64_t{-7}).bind(2, "x\0y").bind_blob(3, blob).run());
  ins->reset();
  ASSERT_TRUE(
      ins->bind(1, std::optional<std::int64_t>()).bind(2, std::optional<std::string>()).bind_null(3).run());
  EXPECT_EQ(db->changes(), 1);

  auto sel = db->prepare("SELECT a, b, c FROM t ORDER BY rowid");
  ASSERT_TRUE(sel);
  ASSERT_TRUE(*sel->step());
  EXPECT_EQ(sel->column_int64(0), -7);
  EXPECT_EQ(sel->column_text(1), "x");
  EXPECT_EQ(sel->column_blob(2), blob);
  ASSERT_TRUE(*sel->step());
  EXPECT_FALSE(sel->column_optional_int64(0));
  EXPECT_FALSE(sel->column_optional_text(1));
  EXPECT_TRUE(sel->column_is_null(2));
  EXPECT_FALSE(*sel->step());
}

TEST(Database, ErrorsComeBackAsResults) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  auto bad = db->prepare("SELEKT 1");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("syntax error"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(db->exec("INSERT INTO missing VALUES (1)"));

  ASSERT_TRUE(db->exec("CREATE TABLE u (a INTEGER PRIMARY KEY)"));
  ASSERT_TRUE(db->exec("INSERT INTO u VALUES (1)"));
  auto dup = db->exec("INSERT INTO u VALUES (1)");
  ASSERT_FALSE(dup);
  EXPECT_TRUE(dup.error().is(errc::invalid_argument)) << dup.error().what();

  auto stmt = db->prepare("SELECT ?1");
  ASSERT_TRUE(stmt);
  stmt->bind(5, std::int64_t{1});  // out of range: reported by step()
  auto row = stmt->step();
  ASSERT_FALSE(row);
  EXPECT_NE(row.error().message.find("parameter 5"), std::string::npos) << row.error().message;
}

TEST(Database, TransactionRollsBackUnlessCommitted) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->exec("CREATE TABLE t (a INTEGER)"));
  {
    auto tx = Transaction::begin(*db);
    ASSERT_TRUE(tx);
    ASSERT_TRUE(db->exec("INSERT INTO t VALUES (1)"));
  }
  {
    auto tx = Transaction::begin(*db);
    ASSERT_TRUE(tx);
    ASSERT_TRUE(db->exec("INSERT INTO t VALUES (2)"));
    ASSERT_TRUE(tx->commit());
    EXPECT_FALSE(tx->commit());
  }
  auto sel = db->prepare("SELECT group_concat(a) FROM t");
  ASSERT_TRUE(sel && *sel->step());
  EXPECT_EQ(sel->column_text(0), "2");
}

TEST(Database, TransactionInsideAnotherIsASavepointUndoneOrKeptAlone) {
  auto db = Database::open(":memory:");
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->exec("CREATE TABLE t (a INTEGER)"));
  {
    auto outer = Transaction::begin(*db);
    ASSERT_TRUE(outer) << outer.error().what();
    ASSERT_TRUE(db->exec("INSERT INTO t VALUES (1)"));
    {
      auto undone = Transaction::begin(*db, Transaction::Lock::shared);
      ASSERT_TRUE(undone) << undone.error().what();
      ASSERT_TRUE(db->exec("INSERT INTO t VALUES (2)"));
    }
    {
      auto kept = Transaction::begin(*db);
      ASSERT_TRUE(kept) << kept.error().what();
      ASSERT_TRUE(db->exec("INSERT INTO t VALUES (3)"));
      ASSERT_TRUE(kept->commit());
    }
    Database moved = std::move(*db);  // the open transaction keeps the connection
    *db = std::move(moved);
    ASSERT_TRUE(outer->commit());
  }
  auto sel = db->prepare("SELECT group_concat(a) FROM t");
  ASSERT_TRUE(sel && *sel->step());
  EXPECT_EQ(sel->column_text(0), "1,3");
}

TEST(Database, FileIsPrivateAndUsesWal) {
  testing::TempDir dir;
  auto path = dir.path() / "x.db";
  auto db = Database::open(path);
  ASSERT_TRUE(db) << db.error().what();
  ASSERT_TRUE(db->exec("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1)"));
  EXPECT_EQ(file_mode(path), 0600u);
  EXPECT_EQ(file_mode(path.string() + "-wal"), 0600u);
  auto mode = db->prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode && *mode->step());
  EXPECT_EQ(mode->column_text(0), "wal");
  auto fk = db->prepare("PRAGMA foreign_keys");
  ASSERT_TRUE(fk && *fk->step());
  EXPECT_EQ(fk->column_int64(0), 1);
}

TEST(Database, ExistingFileIsTightenedTo0600) {
  testing::TempDir dir;
  auto path = dir.path() / "x.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db);
  }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto db = Database::open(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(file_mode(path), 0600u);
}

// The machine's state (core/paths.hpp): the database is shared with group runsnack.
TEST(Database, SharedModeReachesTheWalFiles) {
  testing::TempDir dir;
  auto path = dir.path() / "x.db";
  auto db = Database::open(path, 0660);
  ASSERT_TRUE(db) << db.error().what();
  ASSERT_TRUE(db->exec("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1)"));
  EXPECT_EQ(file_mode(path), 0660u);
  EXPECT_EQ(file_mode(path.string() + "-wal"), 0660u);
  EXPECT_EQ(file_mode(path.string() + "-shm"), 0660u);
}

TEST(Database, NotADatabaseIsMalformed) {
  testing::TempDir dir;
  auto path = dir.path() / "junk.db";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs("this is definitely not an SQLite database file, just some text to fill the header.....", f);
    std::fclose(f);
  }
  auto db = Database::open(path);
  ASSERT_FALSE(db);
  EXPECT_TRUE(db.error().is(errc::malformed)) << db.error().what();
}

TEST(Database, OpenFailsCleanlyInMissingDirectory) {
  auto db = Database::open("/nonexistent-dir-for-runsnack/x.db");
  ASSERT_FALSE(db);
  EXPECT_TRUE(db.error().is(errc::io_error));
}

TEST(Migrate, AppliesInOrderAndIsIdempotent) {
  auto db = Database::open_unmigrated(":memory:");
  ASSERT_TRUE(db);
  const Migration first[] = {{1, "CREATE TABLE a (x INTEGER)"}};
  const Migration both[] = {{1, "CREATE TABLE a (x INTEGER)"}, {2, "ALTER TABLE a ADD COLUMN y TEXT"}};
  EXPECT_EQ(*schema_version(*db), 0);
  EXPECT_EQ(*migrate(*db, first), 1);
  EXPECT_EQ(*migrate(*db, first), 1);  // CREATE TABLE again would fail: not re-run
  EXPECT_EQ(*migrate(*db, both), 2);
  EXPECT_EQ(*migrate(*db, both), 2);
  EXPECT_TRUE(db->exec("INSERT INTO a (x, y) VALUES (1, 'z')"));
}

TEST(Migrate, FailedMigrationLeavesPreviousVersion) {
  auto db = Database::open_unmigrated(":memory:");
  ASSERT_TRUE(db);
  const Migration ms[] = {{1, "CREATE TABLE a (x INTEGER)"}, {2, "CREATE TABLE b (x INTEGER); BROKEN SQL"}};
  auto r = migrate(*db, ms);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("migration 2"), std::string::npos) << r.error().message;
  EXPECT_EQ(*schema_version(*db), 1);
  EXPECT_FALSE(db->exec("INSERT INTO b VALUES (1)"));  // rolled back with the failure
}

TEST(Migrate, RefusesNewerSchema) {
  auto db = Database::open_unmigrated(":memory:");
  ASSERT_TRUE(db);
  const Migration three[] = {{1, "SELECT 1"}, {2, "SELECT 1"}, {3, "SELECT 1"}};
  const Migration one[] = {{1, "SELECT 1"}};
  ASSERT_EQ(*migrate(*db, three), 3);
  auto r = migrate(*db, one);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::unsupported));
}

TEST(Schema, OpenAppliesStoreSchemaOnceAndKeepsIt) {
  testing::TempDir dir;
  auto path = dir.path() / kStoreFileName;
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db) << db.error().what();
    EXPECT_EQ(*schema_version(*db), store_migrations().back().version);
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db) << db.error().what();
  EXPECT_EQ(*schema_version(*db), store_migrations().back().version);
}

TEST(Database, SqliteParametersBecomePostgresOnes) {
  EXPECT_EQ(to_postgres_params("SELECT ? , ? FROM t"), "SELECT $1 , $2 FROM t");
  EXPECT_EQ(to_postgres_params("VALUES (?1, ?2, ?7, ?7) SET a = ?4"), "VALUES ($1, $2, $7, $7) SET a = $4");
  EXPECT_EQ(to_postgres_params("WHERE x = '?' AND y = ?"), "WHERE x = '?' AND y = $1");
}

TEST(Database, RowHelpersReadEveryRowInOrderAndPassOnAStepError) {
  auto db = Database::open_unmigrated(":memory:").value();
  auto st = db.prepare(
                  "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 3) SELECT i, 'r' || i FROM s")
                .value();
  auto rows = read_rows(st, [](Statement& r) { return std::pair{r.column_int64(0), r.column_text(1)}; });
  ASSERT_TRUE(rows);
  EXPECT_EQ(*rows, (std::vector<std::pair<std::int64_t, std::string>>{{1, "r1"}, {2, "r2"}, {3, "r3"}}));
  // An error while stepping (SQLite's integer overflow, on the second row)
  // comes back as the result, after the rows before it were read.
  auto bad = db.prepare("SELECT abs(x) FROM (SELECT 1 AS x UNION ALL SELECT -9223372036854775807 - 1)").value();
  int seen = 0;
  auto r = for_each_row(bad, [&](Statement&) { ++seen; });
  EXPECT_FALSE(r);
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace runsnack
