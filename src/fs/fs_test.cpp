#include "fs/frame.hpp"
#include "fs/ignore_rules.hpp"
#include "fs/manifest.hpp"
#include "fs/path_rules.hpp"
#include "fs/safe_fs.hpp"
#include "fs/tree_scan.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

// The chain s -> ., t -> s/.., u -> t/.. is lexically inside at each step; followed, u leads above the root.
TEST(PathRules, SymlinkChainsAreResolved) {
  std::map<std::string, std::string> links = {{"d/s", "."}, {"d/t", "s/.."}, {"d/u", "t/.."}};
  const LinkLookup link_of = [&](const std::string& p) -> std::optional<std::string> {
    auto it = links.find(p);
    return it == links.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  EXPECT_TRUE(symlink_stays_inside("d/u", "t/.."));
  EXPECT_TRUE(symlink_resolves_inside("d/s", ".", link_of));
  EXPECT_TRUE(symlink_resolves_inside("d/t", "s/..", link_of));  // d/s/.. -> d/.. = the root
  EXPECT_FALSE(symlink_resolves_inside("d/u", "t/..", link_of));  // the root/..
  links = {{"s", "."}, {"t", "s/.."}};
  EXPECT_FALSE(symlink_resolves_inside("t", "s/..", link_of));
  links = {{"a", "b"}, {"b", "a"}};  // a loop counts as outside
  EXPECT_FALSE(symlink_resolves_inside("c", "a/x", link_of));
  links = {{"lib64", "lib"}, {"bin/python", "../lib/python3"}};
  EXPECT_TRUE(symlink_resolves_inside("bin/py", "python", link_of));
  EXPECT_TRUE(symlink_resolves_inside("x", "lib64/../bin", link_of));
  links = {{"up", "/etc"}};
  EXPECT_FALSE(symlink_resolves_inside("x", "up/passwd", link_of));
}

// A path a peer names (cp, --pull) is resolved the same way: links on the way are followed,
// the last one only when asked; one that leads out, at any step, refuses the path.
TEST(PathRules, NamedPathsAreResolvedInsideTheRoot) {
  std::map<std::string, std::string> links = {{"cur", "runs/42"}, {"runs/42/up", "../../.."}, {"out", "/etc"},
                                              {"chain", "cur/up"},  {"last", "runs/42/r.txt"}, {"self", "runs/.."}};
  const LinkLookup link_of = [&](const std::string& p) -> std::optional<std::string> {
    auto it = links.find(p);
    return it == links.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  EXPECT_EQ(resolve_inside("a/b.txt", link_of, false), "a/b.txt");
  EXPECT_EQ(resolve_inside("cur/r.txt", link_of, false), "runs/42/r.txt");
  EXPECT_EQ(resolve_inside("cur", link_of, false), "cur");  // the link itself
  EXPECT_EQ(resolve_inside("cur", link_of, true), "runs/42");
  EXPECT_EQ(resolve_inside("last", link_of, true), "runs/42/r.txt");
  EXPECT_EQ(resolve_inside("self/x", link_of, false), "x");
  EXPECT_EQ(resolve_inside("self", link_of, true), "");  // the root itself
  for (const char* out : {"out/passwd", "cur/up/secret", "chain/x", "runs/42/up/x"})
    EXPECT_FALSE(resolve_inside(out, link_of, false)) << out;
  EXPECT_FALSE(resolve_inside("out", link_of, true));
  EXPECT_EQ(resolve_inside("out", link_of, false), "out");  // not followed: the caller looks at the link
  for (const char* bad : {"", "../x", "a/../../x", "/etc/passwd", "a//b"})
    EXPECT_FALSE(resolve_inside(bad, link_of, true)) << bad;
  links = {{"a", "b"}, {"b", "a"}};  // a loop counts as outside
  EXPECT_FALSE(resolve_inside("a/x", link_of, false));
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
  EXPECT_FALSE(r.ignored(".venv", true)) << "project defaults only when asked for (run's sync)";
}

// run's sync: heavy folders stay by default, named for the user's line; a rule file's line sends one.
TEST(IgnoreRules, ProjectDefaultsAreOverriddenByTheRuleFiles) {
  IgnoreRules r;
  r.add_project_defaults();
  r.add_file_text("!node_modules/\n*.log\n");
  EXPECT_STREQ(r.ignored_by_default(".venv", true), "a virtualenv");
  EXPECT_STREQ(r.ignored_by_default("sub/venv", true), "a virtualenv");
  EXPECT_STREQ(r.ignored_by_default("pkg/__pycache__", true), "Python bytecode");
  EXPECT_FALSE(r.ignored(".venv", false)) << "a file named .venv is no folder";
  EXPECT_FALSE(r.ignored("web/node_modules", true));
  EXPECT_EQ(r.ignored_by_default("web/node_modules", true), nullptr);
  EXPECT_TRUE(r.ignored("x.log", false));
  EXPECT_EQ(r.ignored_by_default("x.log", false), nullptr) << "ignored by the user's rule, not a default";
  EXPECT_EQ(r.ignored_by_default(".git", true), nullptr);
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

std::vector<std::uint8_t> wire_of(std::initializer_list<std::uint8_t> head, const std::string& path,
                                  std::initializer_list<std::uint8_t> tail) {
  std::vector<std::uint8_t> w = {'R', 'S', 'M', '2', 0, 0, 0, 1};
  w.insert(w.end(), head);
  w.push_back(std::uint8_t(path.size() >> 8));
  w.push_back(std::uint8_t(path.size()));
  w.insert(w.end(), path.begin(), path.end());
  w.insert(w.end(), tail);
  return w;
}

TEST(Manifest, RoundTripAndValidation) {
  std::vector<Entry> e = {file("a/b", 'a'), {"d", EntryType::dir, 0, false, "", ""}, {"l", EntryType::link, 0, false, "", "a/b"}};
  e[0].executable = true;
  auto wire = encode_manifest(e);
  auto back = parse_manifest(wire);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, e);
  EXPECT_EQ(manifest_digest(wire), manifest_digest(encode_manifest(*back)));
  e[0].size = 2;
  EXPECT_NE(manifest_digest(wire), manifest_digest(encode_manifest(e)));
  // Each damage alone is refused.
  auto truncated = wire;
  truncated.pop_back();
  EXPECT_FALSE(parse_manifest(truncated));
  auto trailing = wire;
  trailing.push_back(0);
  EXPECT_FALSE(parse_manifest(trailing));
  auto liar = wire;
  liar[4] = 0x7f;  // count far beyond the bytes
  EXPECT_FALSE(parse_manifest(liar));
  EXPECT_TRUE(parse_manifest(wire_of({1}, "d", {})));
  auto old = wire_of({1}, "d", {});
  old[3] = '1';  // a peer from before content digests: a clear refusal
  ASSERT_FALSE(parse_manifest(old));
  EXPECT_NE(parse_manifest(old).error().message.find("older RunSnack"), std::string::npos);
  EXPECT_FALSE(parse_manifest(wire_of({1}, "../x", {})));
  EXPECT_FALSE(parse_manifest(wire_of({1}, "/etc/x", {})));
  EXPECT_FALSE(parse_manifest(wire_of({1}, "a//b", {})));
  EXPECT_FALSE(parse_manifest(wire_of({9}, "d", {})));
  EXPECT_FALSE(parse_manifest(wire_of({0x81}, "d", {})));
  EXPECT_TRUE(parse_manifest(wire_of({2}, "l", {0, 1, 'x'})));
  // Where a link points is the receiver's policy (transfer.hpp), not the format's.
  EXPECT_TRUE(parse_manifest(wire_of({2}, "l", {0, 11, '/', 'e', 't', 'c', '/', 'p', 'a', 's', 's', 'w', 'd'})));
  EXPECT_TRUE(parse_manifest(wire_of({2}, "l", {0, 7, '.', '.', '/', '.', '.', '/', 'x'})));
  EXPECT_FALSE(parse_manifest(wire_of({2}, "l", {0, 0})));  // an empty target
  EXPECT_FALSE(parse_manifest(wire_of({2}, "l", {0, 3, 'a', 0, 'b'})));  // NUL
  std::vector<std::uint8_t> long_target = {0x10, 0x01};  // 4097 bytes: over kMaxPathBytes
  long_target.resize(2 + 4097, 'a');
  auto too_long = wire_of({2}, "l", {});
  too_long.insert(too_long.end(), long_target.begin(), long_target.end());
  EXPECT_FALSE(parse_manifest(too_long));
  std::vector<std::uint8_t> huge(8, 0xff);  // size over kMaxFileBytes
  huge.resize(40, 0);
  std::vector<std::uint8_t> tail(huge.begin(), huge.end());
  auto w = wire_of({0}, "f", {});
  w.insert(w.end(), tail.begin(), tail.end());
  EXPECT_FALSE(parse_manifest(w));
  auto dup = encode_manifest({{"a", EntryType::dir, 0, false, "", ""}, {"a", EntryType::dir, 0, false, "", ""}});
  EXPECT_FALSE(parse_manifest(dup));
}

// A receiver that asked for some paths writes only those, what is inside them and the folders
// above them: a provider cannot add ./.bashrc to `cp remote:out ~/`.
TEST(Manifest, OnlyWhatWasAskedFor) {
  auto dir = [](std::string p) { return Entry{std::move(p), EntryType::dir, 0, false, "", ""}; };
  auto file = [](std::string p) { return Entry{std::move(p), EntryType::file, 1, false, std::string(64, 'a'), ""}; };
  const std::vector<std::string> asked = {"out", "deep/sub/f.txt"};
  EXPECT_EQ(first_unasked({dir("out"), file("out/a"), dir("out/x"), file("out/x/y"), dir("deep"), dir("deep/sub"),
                           file("deep/sub/f.txt")},
                          asked),
            std::nullopt);
  EXPECT_EQ(first_unasked({file("out"), file(".bashrc")}, asked), ".bashrc");
  EXPECT_EQ(first_unasked({file("deep")}, asked), "deep");  // above an asked path: folders only
  EXPECT_EQ(first_unasked({file("outside")}, asked), "outside");
  EXPECT_EQ(first_unasked({dir("deep"), file("deep/other")}, asked), "deep/other");
  EXPECT_EQ(first_unasked({file("deep/sub/f.txt/x")}, asked), std::nullopt);
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

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("fs_test_" + std::to_string(::getpid()) + "_" +
                                                                         std::to_string(counter++));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& rel, const std::string& data) const {
    std::filesystem::create_directories((path / rel).parent_path());
    std::ofstream(path / rel, std::ios::trunc) << data;
  }
  static inline int counter = 0;
};

TEST(HashCache, RehashesAnyChangeAndSurvivesSaveLoad) {
  TempDir dir;
  dir.write("a.txt", "one");
  auto root = open_root(dir.path, false);
  ASSERT_TRUE(root);
  HashCache cache(0);  // no racy window: every put is trusted at once
  auto first = scan_tree(root->get(), "", IgnoreRules(), &cache);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].sha256, sha256_hex("one", 3));
  cache.save(dir.path / "cache");
  HashCache loaded(0);
  loaded.load(dir.path / "cache");
  EXPECT_EQ(loaded.size(), 1u);
  dir.write("a.txt", "two");  // same size: the stamp (mtime/ctime/inode) still tells
  auto second = scan_tree(root->get(), "", IgnoreRules(), &loaded);
  ASSERT_TRUE(second);
  auto it = std::find_if(second->begin(), second->end(), [](const Entry& e) { return e.path == "a.txt"; });
  ASSERT_NE(it, second->end());
  EXPECT_EQ(it->sha256, sha256_hex("two", 3));
}

TEST(HashCache, RacyEntriesAreNotTrusted) {
  HashCache cache;  // 2 s window
  const FileStamp stamp{3, wall_clock_ns(), wall_clock_ns(), 7};
  cache.put("a", stamp, std::string(64, 'a'), wall_clock_ns());
  EXPECT_FALSE(cache.find("a", stamp));  // changed within the window: could change again unseen
  cache.put("b", {3, 0, 0, 7}, std::string(64, 'b'), wall_clock_ns());
  EXPECT_TRUE(cache.find("b", {3, 0, 0, 7}));
  EXPECT_FALSE(cache.find("b", {3, 0, 0, 8}));
}

TEST(SafeFs, TreeUnchangedAndRemoveSynced) {
  TempDir dir;
  dir.write("d/a.txt", "aaa");
  dir.write("d/b.txt", "bbb");
  auto root = open_root(dir.path, false);
  ASSERT_TRUE(root);
  HashCache cache(0);
  auto entries = scan_tree(root->get(), "", IgnoreRules(), &cache);
  ASSERT_TRUE(entries);
  EXPECT_TRUE(tree_unchanged(root->get(), *entries, cache));
  dir.write("d/extra.txt", "x");  // a path the tree does not name does not count
  EXPECT_TRUE(tree_unchanged(root->get(), *entries, cache));
  dir.write("d/a.txt", "AAA");
  EXPECT_FALSE(tree_unchanged(root->get(), *entries, cache));
  DirCursor cursor(root->get());
  const Entry a = *std::find_if(entries->begin(), entries->end(), [](const Entry& e) { return e.path == "d/a.txt"; });
  const Entry b = *std::find_if(entries->begin(), entries->end(), [](const Entry& e) { return e.path == "d/b.txt"; });
  EXPECT_FALSE(remove_synced(cursor, a, cache));  // rewritten since: kept
  EXPECT_TRUE(remove_synced(cursor, b, cache));
  EXPECT_FALSE(std::filesystem::exists(dir.path / "d/b.txt"));
  EXPECT_FALSE(remove_synced(cursor, {"d", EntryType::dir, 0, false, "", ""}, cache));  // not empty
  EXPECT_TRUE(std::filesystem::exists(dir.path / "d/a.txt"));
}

// The walk lists folders a level at a time on several threads; the result must still be the
// depth-first manifest order (a folder, then its contents, names sorted), without ignored paths.
TEST(SafeFs, ParallelScanKeepsManifestOrder) {
  TempDir dir;
  dir.write("b/z.txt", "z");
  dir.write("b/a/deep/x.txt", "x");
  dir.write("a.txt", "a");
  dir.write("c/skip/y.txt", "y");
  dir.write("c/keep.txt", "k");
  std::filesystem::create_symlink("a.txt", dir.path / "b/link");
  ASSERT_EQ(::mkfifo((dir.path / "b/fifo").c_str(), 0600), 0);
  auto root = open_root(dir.path, false);
  ASSERT_TRUE(root);
  IgnoreRules rules;
  rules.add_file_text("skip/\n");
  HashCache cache(0);
  auto entries = scan_tree(root->get(), "", rules, &cache);
  ASSERT_TRUE(entries);
  std::vector<std::string> paths;
  for (const auto& e : *entries) paths.push_back(e.path);
  const std::vector<std::string> expect = {"a.txt", "b", "b/a", "b/a/deep", "b/a/deep/x.txt", "b/link", "b/z.txt",
                                           "c", "c/keep.txt"};
  EXPECT_EQ(paths, expect);
  EXPECT_EQ((*entries)[5].type, EntryType::link);
  EXPECT_EQ((*entries)[5].target, "a.txt");
  EXPECT_EQ((*entries)[4].sha256, sha256_hex("x", 1));
  auto sub = scan_tree(root->get(), "b", rules, &cache);  // a prefix walks from there
  ASSERT_TRUE(sub);
  ASSERT_EQ(sub->size(), 6u);
  EXPECT_EQ((*sub)[0].path, "b");
  EXPECT_EQ((*sub)[3].path, "b/a/deep/x.txt");
}

// A scan of the user's folder (a ScanReport) says what it left out and why, in path order: FIFOs,
// sockets, symlink loops, folders a project default kept; symlinks that point outside travel.
TEST(SafeFs, ScanReportNamesWhatWasLeftOut) {
  TempDir dir;
  dir.write("a.txt", "a");
  dir.write(".venv/pyvenv.cfg", "home = /usr/bin");
  dir.write("pkg/__pycache__/m.pyc", "x");
  std::filesystem::create_symlink("/usr/bin/python3", dir.path / "python3");
  std::filesystem::create_symlink("/nonexistent/runsnack", dir.path / "dangling");
  std::filesystem::create_symlink("loop", dir.path / "loop");
  std::filesystem::create_symlink("y", dir.path / "pkg/x");
  std::filesystem::create_symlink("x", dir.path / "pkg/y");
  ASSERT_EQ(::mkfifo((dir.path / "pkg/fifo").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((dir.path / "ignored.fifo").c_str(), 0600), 0);
  auto root = open_root(dir.path, false);
  ASSERT_TRUE(root);
  IgnoreRules rules;
  rules.add_project_defaults();
  rules.add_file_text("*.fifo\n");
  ScanReport report;
  auto entries = scan_tree(root->get(), "", rules, nullptr, std::nullopt, nullptr, &report);
  ASSERT_TRUE(entries);
  std::vector<std::string> paths;
  for (const auto& e : *entries) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"a.txt", "dangling", "pkg", "python3"}));
  std::vector<std::string> skipped;
  for (const auto& s : report.skipped) skipped.push_back(s.path + " (" + s.why + ")");
  EXPECT_EQ(skipped, (std::vector<std::string>{"loop (a symlink loop)", "pkg/fifo (a FIFO)", "pkg/x (a symlink loop)",
                                               "pkg/y (a symlink loop)"}));
  ASSERT_EQ(report.defaulted.size(), 2u);
  EXPECT_EQ(report.defaulted[0].path, ".venv");
  EXPECT_STREQ(report.defaulted[0].what, "a virtualenv");
  EXPECT_EQ(report.defaulted[1].path, "pkg/__pycache__");
  // Without a report (a provider's scan for a pull) nothing is looked through: loops travel as links.
  auto plain = scan_tree(root->get(), "", IgnoreRules(), nullptr);
  ASSERT_TRUE(plain);
  EXPECT_TRUE(std::any_of(plain->begin(), plain->end(), [](const Entry& e) { return e.path == "loop"; }));
}

// A symlink where the sender now has a folder is replaced by the folder, never followed.
TEST(SafeFs, MakeDirReplacesASymlinkWithoutFollowingIt) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "outside");
  std::filesystem::create_directories(dir.path / "ws");
  std::filesystem::create_directory_symlink(dir.path / "outside", dir.path / "ws" / "data");
  auto root = open_root(dir.path / "ws", false);
  ASSERT_TRUE(root);
  ASSERT_TRUE(make_dir(root->get(), "data"));
  EXPECT_FALSE(std::filesystem::is_symlink(dir.path / "ws" / "data"));
  EXPECT_TRUE(std::filesystem::is_directory(dir.path / "ws" / "data"));
  auto f = AtomicFile::create(root->get(), "data/x");
  ASSERT_TRUE(f);
  ASSERT_TRUE(f->commit(false));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path / "outside"));
  dir.write("ws/file", "f");
  EXPECT_TRUE(make_dir(root->get(), "file")) << "anything else stays as it is";
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path / "ws" / "file"));
}

// tree_unchanged checks slices of a large tree on several threads: a change in any slice counts.
TEST(SafeFs, TreeUnchangedSeesChangesInEverySlice) {
  TempDir dir;
  for (int i = 0; i < 2500; ++i) dir.write("d" + std::to_string(i / 500) + "/f" + std::to_string(i), "x");
  auto root = open_root(dir.path, false);
  ASSERT_TRUE(root);
  HashCache cache(0);
  auto scanned = scan_tree(root->get(), "", IgnoreRules(), &cache);
  ASSERT_TRUE(scanned);
  std::vector<Entry> entries = *scanned;
  ASSERT_EQ(entries.size(), 2505u);
  EXPECT_TRUE(tree_unchanged(root->get(), entries, cache));
  const std::size_t slices[] = {1, entries.size() / 2 + 1, entries.size() - 1};
  for (const std::size_t at : slices) {
    const std::string path = entries[at].path;
    ASSERT_EQ(entries[at].type, EntryType::file) << path;
    dir.write(path, "y");
    EXPECT_FALSE(tree_unchanged(root->get(), entries, cache)) << path;
    auto again = scan_tree(root->get(), "", IgnoreRules(), &cache);  // the cache learns the new content
    ASSERT_TRUE(again);
    EXPECT_FALSE(tree_unchanged(root->get(), entries, cache)) << path;  // the old entry's hash no longer matches
    EXPECT_TRUE(tree_unchanged(root->get(), *again, cache)) << path;
    entries = *again;
  }
  std::filesystem::remove(dir.path / entries.back().path);
  EXPECT_FALSE(tree_unchanged(root->get(), entries, cache));
}

}  // namespace
}  // namespace runsnack::fs
