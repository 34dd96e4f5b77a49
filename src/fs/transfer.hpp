#pragma once
// Tree transfer over a framed stream (frame.hpp), used by run (sync, pull)
// and cp (put, get). The sender offers a manifest, the receiver answers with
// the files it lacks, the sender streams them, the receiver confirms:
//
//   sender   -> {"type":"offer","digest":D,"entries":N}         D: manifest_digest (manifest.hpp)
//   receiver -> {"type":"synced",...} when it holds exactly manifest D still (one round trip), else
//               {"type":"send_manifest"}; a receiver that holds no unchanged tree sends it without
//               waiting for the offer (a sender reads it after writing the offer either way)
//   sender   -> manifest frame                                  (binary, manifest.hpp)
//   receiver -> {"type":"need","paths":[...]} | {"type":"error","message":...}
//               need may carry "bases": {path: [chunk SHA-256...]}, the receiver's older copy of a
//               large file (or the prefix an interrupted transfer kept), in kMaxDataBytes chunks
//   sender   -> for each needed file, in order:
//                 {"type":"file","path":P}  data/zdata frames, {"type":"same","chunks":K}
//                 (the next K chunks equal the receiver's) and {"type":"hole","chunks":K} (the next
//                 K chunks are zeros in a hole of a sparse file: neither read nor sent, and the
//                 receiver leaves a hole)  {"type":"file_end"}
//   receiver -> {"type":"synced","files":N,"bytes":N,"deleted":N} | {"type":"error","message":...}
//
// A receiver with a SyncState (the run workspace) remembers the last manifest
// it applied and the stamps of the files it wrote: an unchanged offer is
// answered after a stat of each entry, and an entry of the previous manifest
// that the new one lacks (deleted on the sender) is removed, when it is still
// what the sync put there (files a command wrote are kept).
//
// Both halves do their file work (scans, hashing, reading, compressing,
// checking the tree) on the offload pool (offload.hpp), never on the io
// thread. A sender may cap the file data it sends (SendLimit), a receiver what
// it writes (WriteLimits): holes do not count.
//
// The receiver never trusts the sender with anything outside the tree: paths
// and symlinks are checked (path_rules.hpp; a symlink must stay inside with
// every symlink on its way followed, in the manifest and on disk, unless the
// receiver lets links point anywhere: ReceiveLimits), writes go through safe_fs.hpp (no
// symlink followed, temp file + rename), each file must match its declared
// size, and the quota bounds single files and the whole tree. Content is
// checked where it is read: the sender vouches that each file's bytes hash to
// its manifest SHA-256 (send_tree), TLS's authenticated encryption carries
// them unchanged, and a file rebuilt partly from the receiver's own older copy
// is hashed again by the receiver (that copy may have changed since its chunks
// were offered). A file is rebuilt in a
// temp file and renamed into place, so no command sees it half written. An
// interrupted transfer leaves finished files in place and keeps the prefix of
// the file it was cut off in, so the next one sends only the rest.

#include "core/error.hpp"
#include "net/mux_stream.hpp"
#include "fs/frame.hpp"
#include "fs/receive_writer.hpp"
#include "fs/safe_fs.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>

namespace runsnack::fs {

struct Frame {
  FrameType type{};
  std::vector<std::uint8_t> payload;
};

boost::asio::awaitable<Result<Frame>> read_frame(MuxStream& stream);
boost::asio::awaitable<Result<nlohmann::json>> read_control(MuxStream& stream);
boost::asio::awaitable<Result<void>> write_frame(MuxStream& stream, FrameType type, std::span<const std::uint8_t> payload);
boost::asio::awaitable<Result<void>> write_control(MuxStream& stream, const nlohmann::json& body);

// Chunk-level reuse: a needed file of at least kChunkedMinBytes that the receiver holds an older
// copy of (or the prefix of an interrupted transfer) travels as "same" runs for the fixed-size
// chunks whose SHA-256 the receiver offered, and as data for the rest.
inline constexpr std::uint64_t kChunkedMinBytes = 1024 * 1024;
inline constexpr std::size_t kMaxBaseChunks = 65536;        // per file (16 GiB of it)
inline constexpr std::size_t kMaxBaseChunksTotal = 262144;  // per need message (~17 MB of JSON)

struct TransferStats {
  std::size_t entries = 0;
  std::size_t files_sent = 0;
  std::uint64_t bytes = 0;       // file bytes that travelled
  std::uint64_t reused_bytes = 0;  // file bytes rebuilt from the receiver's own older copy (chunk level)
  std::uint64_t wire_bytes = 0;  // after compression
  std::size_t deleted = 0;       // entries removed because the sender no longer has them
  bool unchanged = false;        // answered from the receiver's SyncState in one round trip
};

using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

// A path that travels under another name: an entry "wire/x" is read from "source/x" (cp's new
// name for its source, a nested path sent as a top-level one, a pulled path reached through a symlink).
struct PathRename {
  std::string wire, source;
};
// Where the sender reads the entry `wire_path` from: through the first of `renames` that covers it.
std::string source_of(const std::vector<PathRename>& renames, const std::string& wire_path);

// What a sender may send: past `bytes` of file data, the transfer ends with `message` (to both sides).
// A sender with a limit (serving a peer) also refuses a file whose filesystem hides its holes when
// reading it would cost more than it holds (read_bounds.hpp).
struct SendLimit {
  std::uint64_t bytes = 0;
  std::string message;
};

// The sender answers for each file's content: a file the scan's `hashed` cache vouches for (same
// stamp, hashed after its last change) is checked by its stamp after it is read; any other is
// hashed while it is read. A file that no longer matches its manifest entry ends the transfer
// with an error instead of reaching the receiver (a file that grows is not read past its entry's
// size and a chunk). The reading stops when the stream is reset or its session ends
// (MuxStream::stop_token) or the process stops (stop_all_file_work); it is offloaded as the
// stream's peer's work (MuxStream::peer_name, offload.hpp).
boost::asio::awaitable<Result<TransferStats>> send_tree(MuxStream& stream, int root, const std::vector<Entry>& entries,
                                                        Progress progress, std::vector<PathRename> renames = {},
                                                        const HashCache* hashed = nullptr,
                                                        std::optional<SendLimit> limit = {});

struct ReceiveLimits {
  std::optional<std::uint64_t> quota_bytes;  // none: unlimited (checked against the manifest's sizes)
  // Not empty: the paths the receiver asked for (cp get, run --pull); a manifest with anything
  // else (manifest.hpp first_unasked) is refused before anything is written.
  std::vector<std::string> asked;
  WriteLimits write;                         // receive_writer.hpp
  // Symlinks may point anywhere: the run workspace, where they resolve in the sandbox (as in a
  // docker build context or after rsync -a) and where our writes never follow one. Otherwise
  // (this machine's folders: pulls, cp get) a symlink that resolves outside the tree, through
  // other symlinks too, is refused.
  bool links_may_point_outside = false;
};

// What a receiver remembers about its tree between syncs (one file per workspace).
struct SyncState {
  std::string digest;          // of the manifest last applied completely; "" none
  std::vector<Entry> entries;  // that manifest
  HashCache hashes{20'000'000};  // the workspace's files; racy window: ext4's clock tick, with settle()
  // `base`.manifest and `base`.hashes; anything damaged loads as no state.
  void load(const std::filesystem::path& base);
  // Writes both (the folder they are in made first, 0700). False when they could not be written
  // whole (the workspace's quota image is full): then neither is left, so the next load finds no
  // state rather than an older one.
  bool save(const std::filesystem::path& base);
  // Removes both files (and any .tmp of them).
  static void remove(const std::filesystem::path& base);
  // About what this state takes in memory (manifest entries, hash cache), in bytes.
  std::size_t memory_bytes() const;
};

// `state` may be null (cp: no memory between transfers).
boost::asio::awaitable<Result<TransferStats>> receive_tree(MuxStream& stream, int root, ReceiveLimits limits,
                                                           SyncState* state, Progress progress);

}  // namespace runsnack::fs
