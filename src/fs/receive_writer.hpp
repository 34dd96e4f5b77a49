#pragma once
// The receiving end of a tree transfer writes files on a thread of its own: the
// stream's thread decrypts and splits frames while this one decompresses,
// hashes, writes and renames into place. Either alone would leave a core idle
// (the disk side is most of the receiver's work: SHA-256 and ext4 inode
// allocation). Pieces queue in order; the stream side waits, without blocking
// its thread, while more than kMaxQueuedBytes are queued.

#include "core/error.hpp"
#include "fs/frame.hpp"
#include "fs/safe_fs.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace runsnack::fs {

// Large files travel in chunks of this size; the receiver may offer its older copy's chunk hashes.
inline constexpr std::uint64_t kChunkBytes = kMaxDataBytes;

// A receiver's older copy of a file, or the prefix an interrupted transfer kept (resume_name):
// the chunks the sender may refer to with "same".
struct Base {
  UniqueFd fd;
  std::uint64_t size = 0;
  std::size_t chunks = 0;  // offered to the sender
  bool resume = false;     // an interrupted transfer's prefix: removed once the file is in place
};

// What a receiver allows itself to write.
struct WriteLimits {
  std::optional<std::uint64_t> max_bytes;  // file bytes written, reused ones included (holes are not)
  std::string over_message;                // the error once max_bytes is passed
  std::optional<Owner> owner;              // of what is created (a root provider's sandbox uid)
  std::string full_message;                // instead of "No space left on device" (the workspace's quota)
};

struct WrittenStats {
  std::size_t files = 0;
  std::uint64_t bytes = 0;         // file bytes written, reused ones included
  std::uint64_t reused_bytes = 0;  // of which copied from the receiver's own older copy
};

class ReceiveWriter {
 public:
  static constexpr std::size_t kMaxQueuedBytes = 16 * 1024 * 1024;

  // `cache` (may be null) is only touched by the writer's thread until finish() returns.
  ReceiveWriter(boost::asio::any_io_executor io, int root, HashCache* cache, WriteLimits limits = {});
  ~ReceiveWriter();  // drops what is still queued and joins
  ReceiveWriter(const ReceiveWriter&) = delete;
  ReceiveWriter& operator=(const ReceiveWriter&) = delete;

  // A buffer for a data piece of up to kMaxDataBytes: one the writer is done with when there is
  // one (fresh pages for every frame cost a page fault each 4 KiB).
  std::unique_ptr<std::uint8_t[]> buffer();

  // `entry` must outlive the writer. Pieces of one file: begin, data/same..., end.
  void begin(const Entry& entry, std::optional<Base> base);
  // `pooled`: `bytes` came from buffer() and goes back to it once written.
  void data(std::unique_ptr<std::uint8_t[]> bytes, std::size_t size, bool compressed, bool pooled = false);
  void same(std::uint64_t chunks);
  // The next `chunks` chunks are zeros that are not written (a sparse file's holes).
  void hole(std::uint64_t chunks);
  void end();
  // The stream broke inside a file: what was written of it is kept for a resume.
  void abort();

  // The first error the writer met, if any (the stream side stops sending pieces then).
  std::optional<Error> failed();
  // Waits until the queue is short enough for more.
  boost::asio::awaitable<void> wait_for_room();
  // Waits until every queued piece is written; the first error, or what was written.
  boost::asio::awaitable<Result<WrittenStats>> finish();

 private:
  struct Piece {
    enum Kind { begin, data, same, hole, end, abort } kind;
    const Entry* entry = nullptr;
    std::optional<Base> base{};
    std::unique_ptr<std::uint8_t[]> bytes{};
    std::size_t size = 0;  // bytes; chunks for `same`
    bool compressed = false;
    bool pooled = false;
  };
  struct Current;

  void push(Piece piece);
  boost::asio::awaitable<void> wait_until(std::size_t max_queued);
  void run();
  Result<void> apply(Piece& piece);
  Result<void> write_data(Piece& piece);
  Result<void> copy_same(std::uint64_t chunks);
  Result<void> skip_hole(std::uint64_t chunks);
  Result<void> count_written(std::uint64_t bytes);
  Result<void> commit();

  boost::asio::any_io_executor io_;
  WriteLimits limits_;
  DirCursor cursor_;
  HashCache* cache_;
  std::unique_ptr<Current> current_;  // the file being written (writer's thread only)
  WrittenStats stats_;                // writer's thread until idle
  std::uint64_t written_total_ = 0;   // for limits_.max_bytes (writer's thread)

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Piece> queue_;
  std::vector<std::unique_ptr<std::uint8_t[]>> spare_;  // kMaxDataBytes each
  std::size_t queued_bytes_ = 0;
  std::size_t busy_ = 0;  // pieces taken off the queue and not done
  bool idle_ = false;     // the writer sleeps until a push wakes it
  bool stop_ = false;
  std::optional<Error> error_;
  std::shared_ptr<boost::asio::steady_timer> room_;  // set while the stream side waits
  std::thread thread_;
};

}  // namespace runsnack::fs
