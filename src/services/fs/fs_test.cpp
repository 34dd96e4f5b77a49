#include "services/fs/frame.hpp"
#include "services/fs/ignore_rules.hpp"
#include "services/fs/manifest.hpp"
#include "services/fs/path_rules.hpp"
#include "services/fs/safe_fs.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace runsnack::fs {
namespace {

TEST(PathRules, AcceptsPlainRelativePaths) {
  auto p = split_relative_path("src/a.py");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->size(), 2u);
}

TEST(PathRules, RefusesTraversal) {
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/", "a/."})
    EXPECT_FALSE(split_relative_path(bad)) << bad;
  EXPECT_FALSE(split_relative_path(std::string("a\0b", 3)));
}

TEST(PathRules, SymlinkTargets) {
  EXPECT_TRUE(symlink_stays_inside("a/link", "b"));
  EXPECT_TRUE(symlink_stays_inside("a/link", "../c"));
  EXPECT_FALSE(symlink_stays_inside("a/link", "../../c"));
  EXPECT_FALSE(symlink_stays_inside("link", "/etc/passwd"));
  EXPECT_FALSE(symlink_stays_inside("link", ".."));
  EXPECT_TRUE(symlink_stays_inside("a/b/link", "../../x/./y"));
}

TEST(IgnoreRules, GitignoreSubset) {
  IgnoreRules r;
  r.add_file_text("# comment\n*.o\nbuild/\n/top.txt\n!keep.o\ndocs/*.pdf\n\n");
  EXPECT_TRUE(r.ignored("a.o", false));
  EXPECT_TRUE(r.ignored("x/y/a.o", false));
  EXPECT_FALSE(r.ignored("keep.o", false));
  EXPECT_TRUE(r.ignored("build", true));
  EXPECT_FALSE(r.ignored("build", false));  // dir/ matches folders only
  EXPECT_TRUE(r.ignored("top.txt", false));
  EXPECT_FALSE(r.ignored("sub/top.txt", false));  // anchored
  EXPECT_TRUE(r.ignored("docs/a.pdf", false));
  EXPECT_FALSE(r.ignored("docs/sub/a.pdf", false));
  EXPECT_TRUE(r.ignored(".git", true));
  EXPECT_FALSE(r.ignored("main.py", false));
}

Entry file(const std::string& p, char h) { return {p, EntryType::file, 1, false, std::string(64, h), ""}; }

TEST(Manifest, DiffSendsOnlyChanged) {
  std::vector<Entry> wanted = {file("a", 'a'), file("b", 'b'), {"d", EntryType::dir, 0, false, "", ""}, file("c", 'c')};
  std::map<std::string, Entry> have = {{"a", file("a", 'a')}, {"b", file("b", 'f')}};
  EXPECT_EQ(files_to_fetch(wanted, have), (std::vector<std::string>{"b", "c"}));
  have["b"] = file("b", 'b');
  have["c"] = file("c", 'c');
  EXPECT_TRUE(files_to_fetch(wanted, have).empty());
}

TEST(Manifest, RoundTripAndValidation) {
  std::vector<Entry> e = {file("a/b", 'a'), {"d", EntryType::dir, 0, false, "", ""}, {"l", EntryType::link, 0, false, "", "a/b"}};
  auto back = parse_manifest(manifest_json(e));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, e);
  EXPECT_FALSE(parse_manifest(nlohmann::json::parse(R"([{"p":"../x","t":"f","s":1,"h":"00"}])")));
  EXPECT_FALSE(parse_manifest(nlohmann::json::parse(R"([{"p":"/etc/x","t":"d"}])")));
  EXPECT_FALSE(parse_manifest(nlohmann::json::parse(R"([{"p":"l","t":"l","l":"/etc/passwd"}])")));
  EXPECT_FALSE(parse_manifest(nlohmann::json::parse(R"([{"p":"l","t":"l","l":"../../x"}])")));
  EXPECT_FALSE(parse_manifest(nlohmann::json::parse(R"([{"p":"a","t":"d"},{"p":"a","t":"d"}])")));
}

TEST(Frame, HeaderLimits) {
  std::array<std::uint8_t, 5> h{1, 0, 0, 0, 5};
  ASSERT_TRUE(decode_frame_header(h));
  h = {9, 0, 0, 0, 5};
  EXPECT_FALSE(decode_frame_header(h));
  h = {4, 0, 0x10, 0, 0};  // 1 MiB data frame: over kMaxDataBytes
  EXPECT_FALSE(decode_frame_header(h));
  std::vector<std::uint8_t> data(100000, 'x');
  auto z = maybe_compress(data);
  ASSERT_TRUE(z);
  auto back = decompress(*z);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, data);
}

TEST(SafeFs, RefusesSymlinkInPath) {
  auto dir = std::filesystem::temp_directory_path() / ("fs_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "ws");
  std::filesystem::create_directories(dir / "outside");
  std::filesystem::create_directory_symlink(dir / "outside", dir / "ws" / "evil");
  auto root = open_root(dir / "ws", false);
  ASSERT_TRUE(root);
  EXPECT_FALSE(AtomicFile::create(root->get(), "evil/x"));
  auto f = AtomicFile::create(root->get(), "ok/x");
  ASSERT_TRUE(f);
  ASSERT_TRUE(f->write("hi", 2));
  ASSERT_TRUE(f->commit(false));
  EXPECT_TRUE(std::filesystem::exists(dir / "ws" / "ok" / "x"));
  EXPECT_TRUE(std::filesystem::is_empty(dir / "outside"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace runsnack::fs
