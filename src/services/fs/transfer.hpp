#pragma once
// Tree transfer over a framed stream (frame.hpp), used by run (sync, pull)
// and cp (put, get). The sender offers a manifest, the receiver answers with
// the files it lacks, the sender streams them, the receiver confirms:
//
//   sender   -> {"type":"manifest","files":[...]}               (manifest.hpp)
//   receiver -> {"type":"need","paths":[...]} | {"type":"error","message":...}
//   sender   -> for each needed file, in order:
//                 {"type":"file","path":P}  data/zdata frames  {"type":"file_end"}
//   receiver -> {"type":"synced","files":N,"bytes":N} | {"type":"error","message":...}
//
// The receiver never trusts the sender: paths and symlinks are checked
// (path_rules.hpp), writes go through safe_fs.hpp (no symlink followed,
// temp file + rename), each file must match its declared size and SHA-256,
// and the quota bounds single files and the whole tree. An interrupted
// transfer leaves finished files in place, so the next one sends only the rest.

#include "core/error.hpp"
#include "net/mux_stream.hpp"
#include "services/fs/frame.hpp"
#include "services/fs/safe_fs.hpp"

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

struct TransferStats {
  std::size_t entries = 0;
  std::size_t files_sent = 0;
  std::uint64_t bytes = 0;       // file bytes that travelled
  std::uint64_t wire_bytes = 0;  // after compression
};

using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

// Renames the top component on the wire: an entry "wire_top/x" is read from "source_top/x".
struct TopRename {
  std::string wire_top, source_top;
  std::string source_of(const std::string& wire_path) const;
};

boost::asio::awaitable<Result<TransferStats>> send_tree(MuxStream& stream, int root, const std::vector<Entry>& entries,
                                                        Progress progress, std::optional<TopRename> rename = {});

struct ReceiveLimits {
  std::optional<std::uint64_t> quota_bytes;  // none: unlimited
};

boost::asio::awaitable<Result<TransferStats>> receive_tree(MuxStream& stream, int root, ReceiveLimits limits,
                                                           HashCache* cache, Progress progress);

}  // namespace runsnack::fs
