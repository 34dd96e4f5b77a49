// PoolStore: opening the store and the caches of facts that never change.
// The rest, by concern: pool_store_schema.cpp (tables and migrations),
// pool_store_ledger.cpp (entries, balances, audit), pool_store_bank.cpp
// (where credits come from), pool_store_devices.cpp (devices, reputation),
// pool_store_jobs.cpp (a job's life), pool_store_tasks.cpp (claims and
// leases), pool_store_results.cpp (results and their payment),
// pool_store_failures.cpp, pool_store_copies.cpp (quorum copies),
// pool_store_stalls.cpp and pool_store_views.cpp (read-only views).
#include "pool/pool_store.hpp"

#include "pool/pool_store_schema.hpp"

#include <utility>

namespace runsnack::pool {
namespace {

// Cache bounds (PoolStore's caches of facts that never change).
constexpr std::size_t kMaxCachedRefs = 8192, kMaxCachedJobs = 256;

}  // namespace

Result<PoolStore> PoolStore::open(const std::filesystem::path& path, PoolPolicy policy) {
  auto db = Database::open_sqlite(path, pool_migrations_sqlite());
  if (!db) return db.error();
  return PoolStore(std::move(*db), policy);
}

Result<PoolStore> PoolStore::open_postgres(const std::string& url, PoolPolicy policy) {
  auto db = Database::open_postgres(url, pool_migrations_postgres());
  if (!db) return db.error();
  return PoolStore(std::move(*db), policy);
}

Result<const PoolStore::JobMeta*> PoolStore::job_meta(const std::string& job) {
  if (auto it = job_meta_.find(job); it != job_meta_.end()) return &it->second;
  auto js = db_.prepare("SELECT spec, shards, workload, needs FROM jobs WHERE id = ?");
  if (!js) return js.error();
  js->bind(1, std::string_view(job));
  auto jr = js->step();
  if (!jr) return jr.error();
  if (!*jr) return fail(errc::internal, "task without job");
  if (job_meta_.size() >= kMaxCachedJobs) job_meta_.clear();
  JobMeta m{js->column_text(2), js->column_text(3), nlohmann::json::parse(js->column_text(0), nullptr, false),
            js->column_int64(1)};
  return &job_meta_.emplace(job, std::move(m)).first->second;
}

void PoolStore::remember_ref(const std::string& task, TaskRef ref) {
  // Two generations: a full cache becomes the older one, so the refs of
  // tasks still out on lease are not all forgotten at once.
  if (task_refs_.size() >= kMaxCachedRefs) old_task_refs_ = std::exchange(task_refs_, {});
  task_refs_.emplace(task, std::move(ref));
}

Result<std::optional<TaskRef>> PoolStore::task_ref(const std::string& task) {
  if (auto it = task_refs_.find(task); it != task_refs_.end()) return std::optional<TaskRef>(it->second);
  if (auto it = old_task_refs_.find(task); it != old_task_refs_.end()) return std::optional<TaskRef>(it->second);
  auto st = db_.prepare("SELECT job, shard FROM tasks WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(task));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<TaskRef>{};
  TaskRef ref{st->column_text(0), st->column_int64(1)};
  remember_ref(task, ref);
  return std::optional<TaskRef>(std::move(ref));
}

}  // namespace runsnack::pool
