#pragma once
// The provider's database schema: grants and the audit log, in one SQLite
// file (`runsnack.db` in the state directory). Database::open() applies these
// migrations, so every process that opens the file (the provider,
// `runsnack revoke`, `runsnack links`) brings it up to date the same way.

#include <span>

#include "store/migrate.hpp"

namespace runsnack {

inline constexpr const char* kStoreFileName = "runsnack.db";

// The store's migrations, oldest first.
std::span<const Migration> store_migrations();

}  // namespace runsnack
