// PoolStore: a training's files by content, per owner, in chunks (pool/training_data.hpp).
#include "pool/pool_store.hpp"

#include <set>

namespace runsnack::pool {

using json = nlohmann::json;

namespace {

std::span<const std::uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

Result<void> PoolStore::register_training_blob(const std::string& owner, const std::string& sha256, std::uint64_t size) {
  auto blob = training_blob(owner, sha256);
  if (!blob) return blob.error();
  if (*blob && ((*blob)->complete || (*blob)->size == size)) return {};
  // A size that its digest cannot have (an earlier upload named it wrongly): the file starts over.
  if (*blob)
    if (auto r = drop_training_blob(owner, sha256); !r) return r.error();
  auto st = db_.prepare(
      "INSERT INTO training_blobs (owner, sha256, size, stored, complete) VALUES (?1, ?2, ?3, 0, 0) "
      "ON CONFLICT (owner, sha256) DO UPDATE SET size = ?3, stored = 0, complete = 0");
  if (!st) return st.error();
  return st->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256)).bind(3, static_cast<std::int64_t>(size)).run();
}

Result<std::optional<TrainingBlob>> PoolStore::training_blob(const std::string& owner, const std::string& sha256) {
  auto st = db_.prepare("SELECT size, stored, complete FROM training_blobs WHERE owner = ? AND sha256 = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<TrainingBlob>{};
  return std::optional<TrainingBlob>(TrainingBlob{static_cast<std::uint64_t>(st->column_int64(0)),
                                                  static_cast<std::uint64_t>(st->column_int64(1)),
                                                  st->column_int64(2) != 0});
}

Result<std::uint64_t> PoolStore::append_training_chunk(const std::string& owner, const std::string& sha256,
                                                       std::uint64_t offset, std::int64_t chunk, std::string_view bytes) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  // Only where the stored part ends: a chunk sent twice, or out of order, is refused and the sender
  // learns where to go on from.
  std::optional<std::uint64_t> stored;
  {
    auto st = db_.prepare(
        "UPDATE training_blobs SET stored = stored + ?1 WHERE owner = ?2 AND sha256 = ?3 AND complete = 0 "
        "AND stored = ?4 AND stored + ?1 <= size RETURNING stored");
    if (!st) return st.error();
    st->bind(1, static_cast<std::int64_t>(bytes.size())).bind(2, std::string_view(owner)).bind(3, std::string_view(sha256));
    st->bind(4, static_cast<std::int64_t>(offset));
    auto row = st->step();
    if (!row) return row.error();
    if (*row) stored = static_cast<std::uint64_t>(st->column_int64(0));
  }
  if (!stored) {
    auto blob = training_blob(owner, sha256);
    if (!blob) return blob.error();
    if (!*blob) return fail(errc::not_found, "no file " + sha256.substr(0, 12) + " is awaited");
    if ((*blob)->complete) return fail(errc::refused, "file " + sha256.substr(0, 12) + " is complete already");
    return fail(errc::refused, "file " + sha256.substr(0, 12) + ": a chunk at " + std::to_string(offset) + " of " +
                                   std::to_string(bytes.size()) + " bytes, but " + std::to_string((*blob)->stored) +
                                   " of its " + std::to_string((*blob)->size) + " bytes are stored: go on from there");
  }
  auto ins = db_.prepare("INSERT INTO training_chunks (owner, sha256, chunk, bytes) VALUES (?, ?, ?, ?)");
  if (!ins) return ins.error();
  ins->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256)).bind(3, chunk).bind_blob(4, as_bytes(bytes));
  if (auto r = ins->run(); !r) return r.error();
  if (auto c = tx->commit(); !c) return c.error();
  return *stored;
}

Result<std::string> PoolStore::training_chunk(const std::string& owner, const std::string& sha256, std::int64_t chunk) {
  auto st = db_.prepare("SELECT bytes FROM training_chunks WHERE owner = ? AND sha256 = ? AND chunk = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256)).bind(3, chunk);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "file " + sha256.substr(0, 12) + " has no chunk " + std::to_string(chunk));
  auto bytes = st->column_blob(0);
  return std::string(bytes.begin(), bytes.end());
}

Result<void> PoolStore::complete_training_blob(const std::string& owner, const std::string& sha256) {
  auto st = db_.prepare("UPDATE training_blobs SET complete = 1 WHERE owner = ? AND sha256 = ? AND stored = size");
  if (!st) return st.error();
  return st->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256)).run();
}

Result<void> PoolStore::drop_training_blob(const std::string& owner, const std::string& sha256) {
  auto chunks = db_.prepare("DELETE FROM training_chunks WHERE owner = ? AND sha256 = ?");
  if (!chunks) return chunks.error();
  if (auto r = chunks->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256)).run(); !r) return r.error();
  auto st = db_.prepare("UPDATE training_blobs SET stored = 0, complete = 0 WHERE owner = ? AND sha256 = ?");
  if (!st) return st.error();
  return st->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256)).run();
}

Result<std::uint64_t> PoolStore::training_data_bytes(const std::optional<std::string>& owner) {
  auto st = db_.prepare(std::string("SELECT COALESCE(SUM(size), 0) FROM training_blobs") + (owner ? " WHERE owner = ?" : ""));
  if (!st) return st.error();
  if (owner) st->bind(1, std::string_view(*owner));
  auto row = st->step();
  if (!row) return row.error();
  return static_cast<std::uint64_t>(*row ? st->column_int64(0) : 0);
}

Result<void> PoolStore::training_data_ready(const std::string& id) {
  auto st = db_.prepare("UPDATE trainings SET awaiting_data = 0 WHERE id = ?");
  if (!st) return st.error();
  return st->bind(1, std::string_view(id)).run();
}

Result<std::int64_t> PoolStore::incomplete_training_blobs(const std::string& owner) {
  auto st = db_.prepare("SELECT COUNT(*) FROM training_blobs WHERE owner = ? AND complete = 0");
  if (!st) return st.error();
  st->bind(1, std::string_view(owner));
  auto row = st->step();
  if (!row) return row.error();
  return *row ? st->column_int64(0) : 0;
}

Result<std::int64_t> PoolStore::forget_training_data(const std::string& owner) {
  // What the owner's running trainings still name stays; the rest goes.
  std::set<std::string> named;
  {
    auto inputs = db_.prepare("SELECT input FROM trainings WHERE owner = ? AND state = 'running'");
    if (!inputs) return inputs.error();
    inputs->bind(1, std::string_view(owner));
    while (true) {
      auto row = inputs->step();
      if (!row) return row.error();
      if (!*row) break;
      const json input = json::parse(inputs->column_text(0), nullptr, false);
      if (input.is_object() && input.contains("files") && input["files"].is_array())
        for (const auto& f : input["files"])
          if (f.is_object() && f.contains("sha256") && f["sha256"].is_string()) named.insert(f["sha256"].get<std::string>());
    }
  }
  std::vector<std::string> unused;
  {
    auto blobs = db_.prepare("SELECT sha256 FROM training_blobs WHERE owner = ?");
    if (!blobs) return blobs.error();
    blobs->bind(1, std::string_view(owner));
    while (true) {
      auto row = blobs->step();
      if (!row) return row.error();
      if (!*row) break;
      if (!named.count(blobs->column_text(0))) unused.push_back(blobs->column_text(0));
    }
  }
  for (const auto& sha256 : unused) {
    if (auto r = drop_training_blob(owner, sha256); !r) return r.error();
    auto st = db_.prepare("DELETE FROM training_blobs WHERE owner = ? AND sha256 = ?");
    if (!st) return st.error();
    if (auto r = st->bind(1, std::string_view(owner)).bind(2, std::string_view(sha256)).run(); !r) return r.error();
  }
  return static_cast<std::int64_t>(unused.size());
}

}  // namespace runsnack::pool
