#pragma once
// A training's script and data on the coordinator (pool/trainer.hpp): files named by content,
// uploaded in chunks by the submitter, read in chunks by the workers, stored once per owner.
//
//   submitter                         coordinator                           worker
//   train {input: {files: [{path, sha256, size}]}}
//                          -> checks paths, bounds, the script, every shard has files;
//                             answers the digests it lacks ("missing")
//   train_upload {training, sha256, offset, data (base64, one chunk)}  (each missing one, in order)
//                          -> appends; the last chunk of a file checks its digest; the last
//                             file of the training lets its first round start
//                                                   input {job, shard, have, frames, parts}
//                                       <- the files its shard needs: raw frames up to the frame
//                                          budget, the rest {"fetch": true}, the kept by digest
//                                                   input_part {job, sha256, offset} <- one chunk
//
// Why chunks: a pool message is at most 12 MiB (wire.hpp), and one training's data may be
// kMaxTrainDataBytes. Why per owner: the same data submitted again (a second run) is not sent
// again, and one submitter cannot learn from a digest what another uploaded.
// Bounds: kMaxTrainDataBytes a training (a worker keeps its shard in its 256 MiB cache of
// inputs), kMaxTrainDataBytesPerOwner (4 running trainings' worth), kMaxPoolTrainDataBytes
// for the whole pool; a training whose upload has not finished in kUploadDeadlineMs fails.

#include "core/error.hpp"
#include "pool/pool_store.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace runsnack::pool {

inline constexpr std::uint64_t kTrainChunkBytes = 4ull << 20;  // one upload or input_part: 5.3 MiB as base64
inline constexpr std::uint64_t kMaxTrainDataBytesPerOwner = 1ull << 30;
inline constexpr std::uint64_t kMaxPoolTrainDataBytes = 8ull << 30;
inline constexpr std::int64_t kMaxTrainFiles = 10'000;
inline constexpr std::int64_t kUploadDeadlineMs = 3600 * 1000;

struct TrainingFile {
  std::string path, sha256;
  std::uint64_t size = 0;
  std::int64_t shard = -1;  // -1: a top-level file (the script, a module it imports)
};

// What a submitted input names, checked: every path a top-level file or one of
// data/shard-<i>/ with i < workers, each shard with a file, the script among them, the bounds.
// A file given with its "data" (base64) has its digest and size taken from it.
struct TrainingInput {
  std::vector<TrainingFile> files;
  std::vector<std::pair<std::string, std::string>> inline_data;  // sha256, bytes
  std::uint64_t bytes = 0;  // of the distinct files
  nlohmann::json manifest() const;  // {"files": [{"path","sha256","size"}]}, as the store keeps it
};
Result<TrainingInput> parse_training_input(const nlohmann::json& input, const std::string& script, std::int64_t workers);

// A path's shard in a training's input: -1 for a top-level file, i for data/shard-<i>/...
Result<std::int64_t> training_input_shard(const std::string& path, std::int64_t workers);

// Registers the input's files under `owner` and stores what came inline; returns the digests
// still to upload. Refuses when the owner or the pool (`pool_bytes`) would hold more than their bound.
Result<std::vector<std::string>> register_training_input(PoolStore& store, const std::string& owner,
                                                         const TrainingInput& input,
                                                         std::uint64_t pool_bytes = kMaxPoolTrainDataBytes);

// One chunk of an upload; on a file's last chunk its digest is checked (a file that does not
// match is dropped, to be sent again). Returns whether the file is now complete.
Result<bool> put_training_chunk(PoolStore& store, const std::string& owner, const std::string& sha256,
                                std::uint64_t offset, std::string_view bytes);

// A stored file whole (the coordinator sends it as a frame) or one chunk of it.
Result<std::string> read_training_file(PoolStore& store, const std::string& owner, const std::string& sha256);
Result<std::string> read_training_chunk(PoolStore& store, const std::string& owner, const std::string& sha256,
                                        std::uint64_t offset);

}  // namespace runsnack::pool
