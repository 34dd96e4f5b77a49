#include "pool/training_data.hpp"

#include "core/json_fields.hpp"
#include "fs/safe_fs.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/train_round.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

namespace runsnack::pool {

using json = nlohmann::json;

namespace {

bool is_digest(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string mib(std::uint64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

}  // namespace

Result<std::int64_t> training_input_shard(const std::string& path, std::int64_t workers) {
  if (path.empty() || path.size() > 512 || path.front() == '/' || path.find("..") != std::string::npos ||
      path.find('\\') != std::string::npos || path.find("//") != std::string::npos || path.find('\0') != std::string::npos)
    return fail(errc::invalid_argument, "bad input path '" + path.substr(0, 80) + "'");
  if (path.find('/') == std::string::npos) {
    if (path == kRoundWeightsIn || path == "out") return fail(errc::invalid_argument, "'" + path + "' is the round's own name");
    return std::int64_t{-1};
  }
  constexpr std::string_view prefix = "data/shard-";
  if (!path.starts_with(prefix))
    return fail(errc::invalid_argument, "input '" + path.substr(0, 80) + "' is neither a top-level file nor under data/shard-<i>/");
  const std::string rest = path.substr(prefix.size());
  const auto slash = rest.find('/');
  const std::string digits = rest.substr(0, slash);
  if (slash == std::string::npos || slash + 1 == rest.size() || digits.empty() || digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return fail(errc::invalid_argument, "input '" + path.substr(0, 80) + "' is not a file of data/shard-<i>/");
  const std::int64_t shard = std::stoll(digits);
  if (shard >= workers) return fail(errc::invalid_argument, "input '" + path.substr(0, 80) + "' is for a shard past --workers");
  return shard;
}

json TrainingInput::manifest() const {
  json list = json::array();
  for (const auto& f : files) list.push_back({{"path", f.path}, {"sha256", f.sha256}, {"size", f.size}});
  return {{"files", list}};
}

Result<TrainingInput> parse_training_input(const json& input, const std::string& script, std::int64_t workers) {
  if (!input.is_object() || !input.contains("files") || !input["files"].is_array())
    return fail(errc::invalid_argument, "bad input: {\"files\": [...]}");
  if (static_cast<std::int64_t>(input["files"].size()) > kMaxTrainFiles)
    return fail(errc::too_large, "the input names over " + std::to_string(kMaxTrainFiles) + " files");
  TrainingInput out;
  std::vector<std::int64_t> files_per_shard(static_cast<std::size_t>(workers), 0);
  std::set<std::string> paths, digests;
  bool has_script = false;
  for (const auto& f : input["files"]) {
    TrainingFile file;
    file.path = string_or(f, "path");
    auto shard = training_input_shard(file.path, workers);
    if (!shard) return shard.error();
    file.shard = *shard;
    if (!paths.insert(file.path).second) return fail(errc::invalid_argument, "input '" + file.path.substr(0, 80) + "' is named twice");
    if (f.contains("data")) {
      auto data = base64_decode(string_or(f, "data"));
      if (!data) return fail(errc::invalid_argument, "input '" + file.path.substr(0, 80) + "': bad base64");
      file.sha256 = fs::sha256_hex(data->data(), data->size());
      file.size = data->size();
      if (!digests.count(file.sha256)) out.inline_data.emplace_back(file.sha256, std::move(*data));
    } else {
      file.sha256 = string_or(f, "sha256");
      const std::int64_t size = int_or(f, "size", -1);
      if (!is_digest(file.sha256) || size < 0)
        return fail(errc::invalid_argument, "input '" + file.path.substr(0, 80) + "' needs its data, or sha256 (64 hex digits) and size");
      file.size = static_cast<std::uint64_t>(size);
    }
    if (file.size > kMaxTrainDataBytes)
      return fail(errc::too_large, "input '" + file.path.substr(0, 80) + "' is over " + mib(kMaxTrainDataBytes));
    if (digests.insert(file.sha256).second) out.bytes += file.size;
    if (out.bytes > kMaxTrainDataBytes)
      return fail(errc::too_large, "the script and data are over " + mib(kMaxTrainDataBytes) +
                                       ", a training's bound (each worker keeps its shard in a 256 MiB cache): train on a subset");
    if (file.shard >= 0) ++files_per_shard[static_cast<std::size_t>(file.shard)];
    if (file.path == script) has_script = true;
    out.files.push_back(std::move(file));
  }
  if (!has_script) return fail(errc::invalid_argument, "the input has no " + script + " (--script)");
  for (std::size_t i = 0; i < files_per_shard.size(); ++i)
    if (files_per_shard[i] == 0)
      return fail(errc::invalid_argument, "data shard " + std::to_string(i) + " has no files (is --data empty?)");
  return out;
}

Result<std::vector<std::string>> register_training_input(PoolStore& store, const std::string& owner,
                                                         const TrainingInput& input, std::uint64_t pool_bytes) {
  std::map<std::string, std::uint64_t> absent;  // digest -> size: what this owner does not hold yet
  for (const auto& f : input.files) {
    auto blob = store.training_blob(owner, f.sha256);
    if (!blob) return blob.error();
    if (!*blob || !(*blob)->complete) absent.emplace(f.sha256, f.size);
  }
  std::uint64_t more = 0;
  for (const auto& [digest, size] : absent) more += size;
  if (more > 0) {
    auto mine = store.training_data_bytes(owner);
    if (!mine) return mine.error();
    if (*mine + more > kMaxTrainDataBytesPerOwner)
      return fail(errc::too_large, "your trainings' data on this pool would be " + mib(*mine + more) + ", over " +
                                       mib(kMaxTrainDataBytesPerOwner) + ": wait for one to end, or stop one (runsnack pool cancel LINK TRAINING)");
    auto all = store.training_data_bytes(std::nullopt);
    if (!all) return all.error();
    if (*all + more > pool_bytes)
      return fail(errc::exhausted, "this pool holds " + mib(*all) + " of training data, its bound is " +
                                       mib(pool_bytes) + ": try again when other trainings have ended");
  }
  for (const auto& [digest, size] : absent)
    if (auto r = store.register_training_blob(owner, digest, size); !r) return r.error();
  std::set<std::string> stored;
  for (const auto& [digest, data] : input.inline_data) {
    if (!absent.count(digest) || !stored.insert(digest).second) continue;
    // Inline files are small (they came in one message): the chunks a later upload would make.
    auto blob = store.training_blob(owner, digest);
    if (!blob) return blob.error();
    for (std::uint64_t offset = blob && *blob ? (*blob)->stored : 0; offset < data.size(); offset += kTrainChunkBytes) {
      auto done = put_training_chunk(store, owner, digest, offset,
                                     std::string_view(data).substr(offset, std::min<std::uint64_t>(kTrainChunkBytes, data.size() - offset)));
      if (!done) return done.error();
    }
    if (data.empty())
      if (auto done = put_training_chunk(store, owner, digest, 0, {}); !done) return done.error();
  }
  std::vector<std::string> missing;
  for (const auto& [digest, size] : absent)
    if (!stored.count(digest)) missing.push_back(digest);
  return missing;
}

Result<bool> put_training_chunk(PoolStore& store, const std::string& owner, const std::string& sha256,
                                std::uint64_t offset, std::string_view bytes) {
  if (!is_digest(sha256)) return fail(errc::invalid_argument, "sha256 must be 64 hex digits");
  if (offset % kTrainChunkBytes != 0 || bytes.size() > kTrainChunkBytes)
    return fail(errc::invalid_argument, "chunks are " + mib(kTrainChunkBytes) + " from an offset that is a multiple of it");
  auto blob = store.training_blob(owner, sha256);
  if (!blob) return blob.error();
  if (!*blob) return fail(errc::not_found, "no file " + sha256.substr(0, 12) + " is awaited");
  if ((*blob)->complete) return true;
  // Every chunk but a file's last is whole: a file's chunks are its bytes in order, each kTrainChunkBytes.
  if (bytes.size() != kTrainChunkBytes && offset + bytes.size() != (*blob)->size)
    return fail(errc::invalid_argument, "file " + sha256.substr(0, 12) + ": a short chunk that is not its last");
  // An empty file: its one empty chunk.
  if (bytes.empty() && (*blob)->size != 0) return fail(errc::invalid_argument, "an empty chunk");
  auto stored = store.append_training_chunk(owner, sha256, offset, static_cast<std::int64_t>(offset / kTrainChunkBytes), bytes);
  if (!stored) return stored.error();
  if (*stored < (*blob)->size) return false;
  // The last chunk: the file must be what its digest says, else it goes and comes again.
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return fail(errc::internal, "sha256");
  for (std::int64_t chunk = 0; static_cast<std::uint64_t>(chunk) * kTrainChunkBytes < std::max<std::uint64_t>(*stored, 1); ++chunk) {
    auto part = store.training_chunk(owner, sha256, chunk);
    if (!part) return part.error();
    EVP_DigestUpdate(ctx.get(), part->data(), part->size());
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  if (hex_encode(std::string_view(reinterpret_cast<const char*>(md), len)) != sha256) {
    if (auto r = store.drop_training_blob(owner, sha256); !r) return r.error();
    return fail(errc::malformed, "file " + sha256.substr(0, 12) + ": its bytes do not match its digest; send it again from 0");
  }
  if (auto r = store.complete_training_blob(owner, sha256); !r) return r.error();
  return true;
}

Result<std::string> read_training_chunk(PoolStore& store, const std::string& owner, const std::string& sha256,
                                        std::uint64_t offset) {
  if (offset % kTrainChunkBytes != 0) return fail(errc::invalid_argument, "input_part: offset must be a multiple of " + mib(kTrainChunkBytes));
  return store.training_chunk(owner, sha256, static_cast<std::int64_t>(offset / kTrainChunkBytes));
}

Result<std::string> read_training_file(PoolStore& store, const std::string& owner, const std::string& sha256) {
  auto blob = store.training_blob(owner, sha256);
  if (!blob) return blob.error();
  if (!*blob || !(*blob)->complete) return fail(errc::not_found, "file " + sha256.substr(0, 12) + " is not stored");
  std::string data;
  data.reserve((*blob)->size);
  for (std::uint64_t offset = 0; offset < (*blob)->size; offset += kTrainChunkBytes) {
    auto part = read_training_chunk(store, owner, sha256, offset);
    if (!part) return part.error();
    data += *part;
  }
  return data;
}

}  // namespace runsnack::pool
