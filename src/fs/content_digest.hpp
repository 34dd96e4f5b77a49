#pragma once
// A file's content digest, the "sha256" of a manifest entry (manifest.hpp):
//
//   size <= kDigestChunkBytes:  SHA-256(content)
//   larger:                     SHA-256("runsnack-chunked-1" || u64 size (BE) || SHA-256(D0 || D1 || ...))
//                               Di = SHA-256(chunk i), chunks of kDigestChunkBytes, the last one shorter
//
// A chunk that lies in a hole of a sparse file is all zeros, whose SHA-256 is
// a constant: the digest of a 100 GiB sparse file costs its data, not its
// size, and holes never have to be read. The chunk size is the transfer's
// (kMaxDataBytes), so the digests of a large file's chunks are the ones a
// receiver offers for chunk reuse too.
//
// ContentDigest takes the bytes in any pieces, in order; zeros(n) stands for
// n zero bytes without them. Not thread-safe.

#include "core/error.hpp"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace runsnack::fs {

inline constexpr std::uint64_t kDigestChunkBytes = 256 * 1024;

class ContentDigest {
 public:
  ContentDigest();
  void update(std::span<const std::uint8_t> bytes);
  void zeros(std::uint64_t n);
  // Lowercase hex; the digest is then spent.
  std::string finish();
  std::uint64_t size() const { return size_; }

 private:
  void close_chunk();
  void add_chunk_digest(const std::array<std::uint8_t, 32>& d);
  using Ctx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
  Ctx chunk_, outer_;
  std::uint64_t size_ = 0, in_chunk_ = 0, chunks_ = 0;
  std::array<std::uint8_t, 32> first_{};  // chunk 0's digest: the whole answer for a small file
};

struct ReadBounds;

// The digest of what `fd` holds (read from offset 0 with pread, to its end), skipping the holes
// of a sparse file (SEEK_DATA / SEEK_HOLE). With `bounds` (read_bounds.hpp: reading for a peer),
// a file whose holes its filesystem hides is refused before it is read (errc::refused), the
// reading ends when they say stop (errc::closed), and nothing past the size it had when this
// began is read (a file that grows meanwhile fails later, as changed).
Result<std::string> content_digest_fd(int fd, const ReadBounds* bounds = nullptr);

// Where the next data is at or after `offset` (the file's size when only a hole follows), and
// where that data run ends. Filesystems without hole reporting say: all data.
struct DataRun {
  std::uint64_t begin, end;
};
DataRun next_data(int fd, std::uint64_t offset, std::uint64_t size);

}  // namespace runsnack::fs
