// What reading for a peer may cost (read_bounds.hpp): files whose filesystem hides their holes are
// judged by what they hold, and bounded reads stop when told.
#include "fs/read_bounds.hpp"

#include "fs/safe_fs.hpp"
#include "fs/tree_scan.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

namespace runsnack::fs {
namespace {

constexpr std::uint64_t kTiB = 1ull << 40, kMiB = 1ull << 20;

TEST(UnseenHoles, AFileWithNoBlocksReportedAsAllDataIsRefusedWithItsSizes) {
  // fuse2fs: `truncate -s 1T big` has no blocks, and SEEK_HOLE says the whole file is data.
  auto r = check_unseen_holes(kTiB, 0, DataRun{0, kTiB});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::refused);
  EXPECT_NE(r.error().what().find("sparse file of 1 TiB with 0 bytes allocated"), std::string::npos) << r.error().what();
  EXPECT_NE(r.error().what().find("read all 1 TiB"), std::string::npos) << r.error().what();
  // Data at its start and the rest unseen: judged by what follows the first data.
  EXPECT_FALSE(check_unseen_holes(kTiB, 4096, DataRun{4096 * 10, kTiB}));
}

TEST(UnseenHoles, ReportedHolesOrAFileThatHoldsEnoughAreRead) {
  // ext4, tmpfs: the first run ends where a hole begins, or only a hole is left.
  EXPECT_TRUE(check_unseen_holes(kTiB, 0, DataRun{kTiB, kTiB}));
  EXPECT_TRUE(check_unseen_holes(kTiB, 8 * kMiB, DataRun{0, 8 * kMiB}));
  // Unseen holes, but the whole file costs at most twice what it holds plus 64 MiB.
  EXPECT_TRUE(check_unseen_holes(64 * kMiB, 0, DataRun{0, 64 * kMiB}));
  EXPECT_FALSE(check_unseen_holes(64 * kMiB + 1, 0, DataRun{0, 64 * kMiB + 1}));
  EXPECT_TRUE(check_unseen_holes(164 * kMiB, 50 * kMiB, DataRun{0, 164 * kMiB}));
  EXPECT_FALSE(check_unseen_holes(165 * kMiB, 50 * kMiB, DataRun{0, 165 * kMiB}));
  EXPECT_TRUE(check_unseen_holes(UINT64_MAX, UINT64_MAX / 2, DataRun{0, UINT64_MAX}));  // no overflow
}

TEST(UnseenHoles, SizesInWords) {
  EXPECT_EQ(binary_size_text(0), "0 bytes");
  EXPECT_EQ(binary_size_text(1), "1 byte");
  EXPECT_EQ(binary_size_text(4096), "4 KiB");
  EXPECT_EQ(binary_size_text(64 * kMiB), "64 MiB");
  EXPECT_EQ(binary_size_text(3 * kMiB / 2), "1.5 MiB");
  EXPECT_EQ(binary_size_text(50ull << 30), "50 GiB");
  EXPECT_EQ(binary_size_text(kTiB), "1 TiB");
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/runsnack-bounds-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(ReadBounds, ABoundedDigestStopsWhenItsRequesterGoes) {
  TempDir dir;
  UniqueFd f(::open((dir.path() / "f").c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_TRUE(f);
  const std::vector<std::uint8_t> data(8 * kMiB, 7);
  ASSERT_EQ(::write(f.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  std::stop_source consumer;
  const ReadBounds bounds{consumer.get_token()};
  auto before = content_digest_fd(f.get(), &bounds);
  ASSERT_TRUE(before) << before.error().what();
  EXPECT_EQ(*before, *content_digest_fd(f.get()));  // the same digest as an unbounded one
  consumer.request_stop();
  auto after = content_digest_fd(f.get(), &bounds);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, errc::closed);
  EXPECT_NE(after.error().what().find("the consumer went away"), std::string::npos);
}

TEST(ReadBounds, ABoundedScanFailsWithTheStopInsteadOfLeavingFilesOut) {
  TempDir dir;
  for (const char* name : {"a", "b"}) {
    UniqueFd f(::open((dir.path() / name).c_str(), O_RDWR | O_CREAT, 0600));
    ASSERT_EQ(::write(f.get(), "data", 4), 4);
  }
  UniqueFd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY));
  std::stop_source consumer;
  const ReadBounds bounds{consumer.get_token()};
  auto open = scan_tree(root.get(), "", IgnoreRules(), nullptr, std::nullopt, &bounds);
  ASSERT_TRUE(open) << open.error().what();
  EXPECT_EQ(open->size(), 2u);
  consumer.request_stop();
  auto stopped = scan_tree(root.get(), "", IgnoreRules(), nullptr, std::nullopt, &bounds);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, errc::closed);
  auto one = scan_tree(root.get(), "a", IgnoreRules(), nullptr, std::nullopt, &bounds);
  ASSERT_FALSE(one);  // a single file: the reason, not "no such file"
  EXPECT_EQ(one.error().code, errc::closed);
  EXPECT_EQ(scan_tree(root.get(), "", IgnoreRules(), nullptr)->size(), 2u);  // unbounded: as before
}

TEST(ReadBounds, ASparseFileWhoseHolesAreShownIsNotRefused) {
  // /tmp (tmpfs or ext4) shows holes: 1 TiB holding 4 KiB is judged by what it holds, and read cheaply.
  TempDir dir;
  UniqueFd f(::open((dir.path() / "big").c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_EQ(::pwrite(f.get(), "x", 1, 1 << 20), 1);
  ASSERT_EQ(::ftruncate(f.get(), static_cast<off_t>(kTiB)), 0);
  struct stat st{};
  ASSERT_EQ(::fstat(f.get(), &st), 0);
  if (next_data(f.get(), 0, kTiB).end == kTiB) GTEST_SKIP() << "this filesystem does not report holes";
  EXPECT_TRUE(check_unseen_holes(f.get(), st));
  const ReadBounds bounds;
  EXPECT_TRUE(content_digest_fd(f.get(), &bounds));
}

}  // namespace
}  // namespace runsnack::fs
