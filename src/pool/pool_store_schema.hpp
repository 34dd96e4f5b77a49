#pragma once
// The pool store's migrations (pool_store_schema.cpp), for PoolStore::open
// and open_postgres only.
#include "store/migrate.hpp"

#include <span>

namespace runsnack::pool {

std::span<const Migration> pool_migrations_sqlite();
std::span<const Migration> pool_migrations_postgres();

}  // namespace runsnack::pool
