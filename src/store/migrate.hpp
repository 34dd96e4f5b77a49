#pragma once
// Numbered schema migrations, for either engine of store/database.hpp.
//
// SQLite: the database records the highest applied number in
// `schema_version`; migrate() applies each later one, in order, each in its
// own BEGIN IMMEDIATE transaction together with the new version number, so a
// crash leaves the schema at a whole version and two processes opening the
// same file at once apply each migration exactly once.
//
// PostgreSQL: every later migration in one transaction under the exclusive
// advisory lock, each recorded as a row of `pool_schema_version` (named for
// its first user, the pool; kept so deployed databases stay readable).

#include <span>

#include "core/error.hpp"
#include "store/database.hpp"

namespace runsnack {

struct Migration {
  int version;      // 1, 2, 3, ... strictly increasing; never renumber a shipped one
  const char* sql;  // one or more statements
};

// Applies the migrations newer than the database's version; returns the
// version the database is at afterwards. Fails (and changes nothing more)
// when a migration fails, or with `unsupported` when the database was written
// by a newer RunSnack (its version is above every known migration).
Result<int> migrate(Database& db, std::span<const Migration> migrations);

// The version recorded in a SQLite database, 0 for a new one.
Result<int> schema_version(Database& db);

}  // namespace runsnack
