#include "fs/content_digest.hpp"

#include "fs/manifest.hpp"
#include "fs/read_bounds.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace runsnack::fs {

namespace {

constexpr char kChunkedTag[] = "runsnack-chunked-1";

// SHA-256 of one chunk of zeros, computed once.
const std::array<std::uint8_t, 32>& zero_chunk_digest() {
  static const std::array<std::uint8_t, 32> digest = [] {
    std::vector<std::uint8_t> zeros(kDigestChunkBytes, 0);
    std::array<std::uint8_t, 32> d{};
    unsigned len = 0;
    EVP_Digest(zeros.data(), zeros.size(), d.data(), &len, EVP_sha256(), nullptr);
    return d;
  }();
  return digest;
}

const std::uint8_t* zero_bytes() {
  static const std::vector<std::uint8_t> zeros(kDigestChunkBytes, 0);
  return zeros.data();
}

}  // namespace

ContentDigest::ContentDigest() : chunk_(EVP_MD_CTX_new(), EVP_MD_CTX_free), outer_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
  EVP_DigestInit_ex(chunk_.get(), EVP_sha256(), nullptr);
}

void ContentDigest::update(std::span<const std::uint8_t> bytes) {
  while (!bytes.empty()) {
    if (in_chunk_ == kDigestChunkBytes) close_chunk();
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes.size(), kDigestChunkBytes - in_chunk_));
    EVP_DigestUpdate(chunk_.get(), bytes.data(), n);
    in_chunk_ += n;
    size_ += n;
    bytes = bytes.subspan(n);
  }
}

void ContentDigest::zeros(std::uint64_t n) {
  while (n > 0) {
    if (in_chunk_ == kDigestChunkBytes) close_chunk();
    if (in_chunk_ == 0 && n >= kDigestChunkBytes) {  // a whole chunk of zeros: its digest is known
      add_chunk_digest(zero_chunk_digest());
      size_ += kDigestChunkBytes;
      n -= kDigestChunkBytes;
      continue;
    }
    const std::uint64_t step = std::min<std::uint64_t>(n, kDigestChunkBytes - in_chunk_);
    update(std::span<const std::uint8_t>(zero_bytes(), static_cast<std::size_t>(step)));
    n -= step;
  }
}

void ContentDigest::add_chunk_digest(const std::array<std::uint8_t, 32>& d) {
  if (chunks_ == 0) {
    first_ = d;
    EVP_DigestInit_ex(outer_.get(), EVP_sha256(), nullptr);
  }
  EVP_DigestUpdate(outer_.get(), d.data(), d.size());
  ++chunks_;
}

void ContentDigest::close_chunk() {
  std::array<std::uint8_t, 32> d{};
  unsigned len = 0;
  EVP_DigestFinal_ex(chunk_.get(), d.data(), &len);
  add_chunk_digest(d);
  in_chunk_ = 0;
  EVP_DigestInit_ex(chunk_.get(), EVP_sha256(), nullptr);
}

std::string ContentDigest::finish() {
  if (size_ <= kDigestChunkBytes) {
    std::array<std::uint8_t, 32> d{};
    unsigned len = 0;
    if (chunks_ == 0) EVP_DigestFinal_ex(chunk_.get(), d.data(), &len);
    else d = first_;  // one chunk of zeros, added as its known digest
    return bytes_to_hex(d.data(), d.size());
  }
  if (in_chunk_ > 0) close_chunk();
  std::array<std::uint8_t, 32> digests{};
  unsigned len = 0;
  EVP_DigestFinal_ex(outer_.get(), digests.data(), &len);
  std::uint8_t size_be[8];
  for (int i = 0; i < 8; ++i) size_be[i] = static_cast<std::uint8_t>(size_ >> (56 - 8 * i));
  Ctx last(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(last.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(last.get(), kChunkedTag, sizeof kChunkedTag - 1);
  EVP_DigestUpdate(last.get(), size_be, sizeof size_be);
  EVP_DigestUpdate(last.get(), digests.data(), digests.size());
  std::array<std::uint8_t, 32> d{};
  EVP_DigestFinal_ex(last.get(), d.data(), &len);
  return bytes_to_hex(d.data(), d.size());
}

DataRun next_data(int fd, std::uint64_t offset, std::uint64_t size) {
  if (offset >= size) return {size, size};
  const off_t data = ::lseek(fd, static_cast<off_t>(offset), SEEK_DATA);
  if (data < 0) {
    if (errno == ENXIO) return {size, size};  // only a hole from here
    return {offset, size};                    // no hole reporting: all data
  }
  const off_t hole = ::lseek(fd, data, SEEK_HOLE);
  const std::uint64_t end = hole < 0 ? size : std::min<std::uint64_t>(static_cast<std::uint64_t>(hole), size);
  return {std::min<std::uint64_t>(static_cast<std::uint64_t>(data), size), std::max<std::uint64_t>(end, static_cast<std::uint64_t>(data))};
}

Result<std::string> content_digest_fd(int fd, const ReadBounds* bounds) {
  struct stat st{};
  if (::fstat(fd, &st) != 0) return fail(errc::io_error, std::string("stat: ") + std::strerror(errno));
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  // Only a file with fewer blocks than bytes can have holes: others are read straight through.
  const bool sparse = static_cast<std::uint64_t>(st.st_blocks) * 512 < size;
  if (bounds && bounds->refuse_unseen_holes && sparse)
    if (auto r = check_unseen_holes(fd, st); !r) return r.error();
  constexpr std::size_t kBufBytes = 1 << 20;
  static thread_local const std::unique_ptr<std::uint8_t[]> buf = std::make_unique_for_overwrite<std::uint8_t[]>(kBufBytes);
  ContentDigest digest;
  std::uint64_t at = 0;
  auto read_until = [&](std::uint64_t end) -> Result<bool> {  // false: the file ended first
    while (at < end) {
      if (bounds && bounds->stopped()) return bounds->stopped_error();
      const ssize_t n = ::pread(fd, buf.get(), static_cast<std::size_t>(std::min<std::uint64_t>(kBufBytes, end - at)),
                                static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(errc::io_error, std::string("read: ") + std::strerror(errno));
      if (n == 0) return false;
      digest.update(std::span<const std::uint8_t>(buf.get(), static_cast<std::size_t>(n)));
      at += static_cast<std::uint64_t>(n);
    }
    return true;
  };
  while (at < size) {
    DataRun run = sparse ? next_data(fd, at, size) : DataRun{at, size};
    // A hole's digest costs a hash of 32 bytes per chunk: a stop is looked at every 16 GiB of it.
    constexpr std::uint64_t kHoleStep = 16ull << 30;
    while (run.begin > at) {
      if (bounds && bounds->stopped()) return bounds->stopped_error();
      const std::uint64_t step = std::min(run.begin - at, kHoleStep);
      digest.zeros(step);
      at += step;
    }
    auto more = read_until(std::max(run.end, std::min(size, at + 1)));
    if (!more) return more.error();
    if (!*more) return digest.finish();
  }
  if (bounds) return digest.finish();  // what was appended since the stat is not read for a peer
  // Whatever was appended since the stat.
  auto rest = read_until(UINT64_MAX);
  if (!rest) return rest.error();
  return digest.finish();
}

}  // namespace runsnack::fs
