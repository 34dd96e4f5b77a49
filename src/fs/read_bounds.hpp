#pragma once
// What reading files for a peer (a pull, a cp from the workspace) may cost, and when it stops.
//
// A peer can make a file of any size that holds nothing: `truncate -s 1T big`. Where the
// filesystem shows its holes (SEEK_DATA / SEEK_HOLE: ext4, xfs, btrfs, tmpfs) they are never
// read (content_digest.hpp, send_tree). fuse2fs, which mounts an ordinary user's quota image,
// answers as if such a file were all data (SEEK_HOLE gives its size), and reading 1 TiB of holes
// through it takes 20 minutes. So with bounds, a file whose filesystem reports more data than
// the file can hold (its allocated blocks, st_blocks) is refused before anything is read: reading
// a file may cost at most kUnseenHoleFactor x what it holds + kUnseenHoleSlack.
//
// And the reading stops between pieces of at most 1 MiB when whoever asked for it goes (`stop`:
// the stream's, requested when the consumer resets it or its session ends) or when the process
// is stopping (stop_all_file_work(), on SIGTERM). Thread-safe: the flags are atomic.

#include "core/error.hpp"
#include "fs/content_digest.hpp"

#include <cstdint>
#include <stop_token>
#include <string>

struct stat;

namespace runsnack::fs {

inline constexpr std::uint64_t kUnseenHoleFactor = 2;
// Small sparse files (a database's, a core file) stay cheap enough to read whole.
inline constexpr std::uint64_t kUnseenHoleSlack = 64ull << 20;

struct ReadBounds {
  std::stop_token stop;             // its requester went away
  bool refuse_unseen_holes = true;  // check_unseen_holes before a file is read

  // `stop` was requested or the process is stopping.
  bool stopped() const;
  // What a read that stopped returns (errc::closed).
  Error stopped_error() const;
};

// The process is stopping (SIGTERM): every bounded read ends at its next piece. Never undone.
void stop_all_file_work();
bool all_file_work_stopped();

// The decision, without a file: `size` bytes of which `allocated` are allocated, and the first run
// the filesystem reports as data. A filesystem that shows its holes either reports holes (the run
// ends before the file does) or a run that the allocation covers; one that does not reports the
// rest of the file as one run. Ok when reading that run costs at most the bound, else
// errc::refused with the sizes in words.
Result<void> check_unseen_holes(std::uint64_t size, std::uint64_t allocated, DataRun first);

// The same for an open regular file (`st` its fstat). Filesystems that count compressed blocks in
// st_blocks and show holes themselves (ZFS) are not judged.
Result<void> check_unseen_holes(int fd, const struct stat& st);

// "1 TiB", "64 MiB", "0 bytes": for messages.
std::string binary_size_text(std::uint64_t bytes);

}  // namespace runsnack::fs
