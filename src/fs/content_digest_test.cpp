// The content digest (content_digest.hpp): plain SHA-256 up to one chunk, chunked above, and the
// same answer whether zeros are read, announced or lie in a hole of a sparse file.
#include "fs/content_digest.hpp"

#include "fs/safe_fs.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace runsnack::fs {
namespace {

std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 31);
  return v;
}

std::string digest_of(const std::vector<std::uint8_t>& data) {
  ContentDigest d;
  d.update(data);
  return d.finish();
}

TEST(ContentDigest, SmallFilesArePlainSha256) {
  const auto data = bytes(1000, 1);
  EXPECT_EQ(digest_of(data), sha256_hex(data.data(), data.size()));
  const auto chunk = bytes(kDigestChunkBytes, 2);
  EXPECT_EQ(digest_of(chunk), sha256_hex(chunk.data(), chunk.size()));
  EXPECT_EQ(digest_of({}), sha256_hex("", 0));
}

TEST(ContentDigest, LargeFilesAreChunkedAndPiecesDoNotMatter) {
  const auto data = bytes(3 * kDigestChunkBytes + 12345, 3);
  const std::string whole = digest_of(data);
  EXPECT_NE(whole, sha256_hex(data.data(), data.size()));
  ContentDigest pieces;
  for (std::size_t at = 0; at < data.size(); at += 7777)
    pieces.update(std::span<const std::uint8_t>(data).subspan(at, std::min<std::size_t>(7777, data.size() - at)));
  EXPECT_EQ(pieces.finish(), whole);
  auto longer = data;
  longer.push_back(0);
  EXPECT_NE(digest_of(longer), whole);  // the size is bound in
}

TEST(ContentDigest, AnnouncedZerosEqualReadZeros) {
  for (std::uint64_t size : {std::uint64_t(100), kDigestChunkBytes, kDigestChunkBytes + 1, 5 * kDigestChunkBytes + 99}) {
    std::vector<std::uint8_t> zeros(size, 0);
    ContentDigest announced;
    announced.zeros(size);
    EXPECT_EQ(announced.finish(), digest_of(zeros)) << size;
  }
  auto data = bytes(2 * kDigestChunkBytes, 4);
  std::vector<std::uint8_t> mixed(data.begin(), data.begin() + 1000);
  mixed.resize(mixed.size() + 3 * kDigestChunkBytes, 0);
  mixed.insert(mixed.end(), data.begin(), data.end());
  ContentDigest d;
  d.update(std::span<const std::uint8_t>(data.data(), 1000));
  d.zeros(3 * kDigestChunkBytes);
  d.update(data);
  EXPECT_EQ(d.finish(), digest_of(mixed));
}

TEST(ContentDigest, SparseFileDigestSkipsHolesAndMatchesDense) {
  char tmpl[] = "/tmp/runsnack-digest-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir(tmpl);
  const auto data = bytes(kDigestChunkBytes + 17, 5);
  const std::uint64_t gap = 1ull << 34;  // 16 GiB of hole: reading it would take minutes
  UniqueFd sparse(::open((dir / "sparse").c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_TRUE(sparse);
  ASSERT_EQ(::pwrite(sparse.get(), data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::pwrite(sparse.get(), data.data(), data.size(), static_cast<off_t>(gap)), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::ftruncate(sparse.get(), static_cast<off_t>(gap + data.size() + gap)), 0);  // a trailing hole too
  auto got = content_digest_fd(sparse.get());
  ASSERT_TRUE(got) << got.error().what();
  ContentDigest expect;
  expect.update(data);
  expect.zeros(gap - data.size());
  expect.update(data);
  expect.zeros(gap);
  EXPECT_EQ(*got, expect.finish());
  // A dense file with the same bytes has the same digest.
  const auto dense_bytes = bytes(3 * kDigestChunkBytes, 6);
  UniqueFd dense(::open((dir / "dense").c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_EQ(::write(dense.get(), dense_bytes.data(), dense_bytes.size()), static_cast<ssize_t>(dense_bytes.size()));
  EXPECT_EQ(*content_digest_fd(dense.get()), digest_of(dense_bytes));
  std::filesystem::remove_all(dir);
}

TEST(ContentDigest, NextDataFindsRuns) {
  char tmpl[] = "/tmp/runsnack-digest-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir(tmpl);
  UniqueFd f(::open((dir / "f").c_str(), O_RDWR | O_CREAT, 0600));
  const auto data = bytes(4096, 7);
  ASSERT_EQ(::pwrite(f.get(), data.data(), data.size(), 1 << 20), 4096);
  ASSERT_EQ(::ftruncate(f.get(), 4 << 20), 0);
  const DataRun run = next_data(f.get(), 0, 4 << 20);
  EXPECT_EQ(run.begin, 1u << 20);
  EXPECT_GE(run.end, (1u << 20) + 4096);
  EXPECT_LT(run.end, 4u << 20);
  EXPECT_EQ(next_data(f.get(), run.end, 4 << 20).begin, 4u << 20);  // only a hole after it
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace runsnack::fs
