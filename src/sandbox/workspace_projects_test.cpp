#include "sandbox/launch.hpp"
#include "sandbox/workspace_names.hpp"
#include "sandbox/workspace_projects.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <string>

namespace runsnack::exec {
namespace {

namespace sfs = std::filesystem;

struct TempDir {
  sfs::path path;
  TempDir() {
    char tmpl[] = "/tmp/runsnack-ws-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { sfs::remove_all(path); }
};

void write(const sfs::path& p, const std::string& text) {
  sfs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string read(const sfs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(WorkspaceNames, OnlyPlainNames) {
  for (const char* ok : {"default", "train-3f9a2c41", "a", "A.b_c-d", "x1"}) EXPECT_TRUE(checked_workspace_name(ok)) << ok;
  for (const char* bad : {"", ".", "..", ".hidden", "-x", "a/b", "../x", "a b", "lost+found", "é"})
    EXPECT_FALSE(checked_workspace_name(bad)) << bad;
  EXPECT_TRUE(checked_workspace_name(std::string(64, 'x')));
  EXPECT_FALSE(checked_workspace_name(std::string(65, 'x')));
}

TEST(WorkspaceNames, ProjectNameIsTheFolderAndItsPathHash) {
  // python3 -c 'import hashlib; print(hashlib.sha256(b"/home/ana/train").hexdigest()[:8])'
  const std::string name = project_workspace_name("/home/ana/train");
  EXPECT_EQ(name, "train-47baefee");
  EXPECT_EQ(project_workspace_name("/home/ana/train/"), name);
  EXPECT_NE(project_workspace_name("/home/bo/train"), name);
  EXPECT_TRUE(checked_workspace_name(project_workspace_name("/tmp/.hidden dir/ünï")));
  EXPECT_EQ(project_workspace_name("/").substr(0, 8), "project-");
}

TEST(WorkspaceNames, FromStreamArguments) {
  EXPECT_EQ(*workspace_name_in(nlohmann::json{{"mode", "sync"}}), "default");  // an earlier consumer
  EXPECT_EQ(*workspace_name_in(nlohmann::json{{"workspace", "exp1"}}), "exp1");
  EXPECT_FALSE(workspace_name_in(nlohmann::json{{"workspace", 7}}));
  EXPECT_FALSE(workspace_name_in(nlohmann::json{{"workspace", "../../etc"}}));
}

TEST(WorkspaceProjects, EarlierFilesMoveIntoDefault) {
  TempDir t;
  const sfs::path dir = t.path / "peer";
  write(dir / "a.txt", "a");
  write(dir / "default" / "b.txt", "b");  // a folder of the old workspace named like the new one
  ASSERT_TRUE(adopt_workspaces_folder(dir));
  EXPECT_EQ(read(dir / "default" / "a.txt"), "a");
  EXPECT_EQ(read(dir / "default" / "default" / "b.txt"), "b");
  EXPECT_EQ(workspace_names_in(dir), std::vector<std::string>{"default"});
  // Marked: a workspace made later is not moved again.
  sfs::create_directory(dir / "exp");
  ASSERT_TRUE(adopt_workspaces_folder(dir));
  EXPECT_EQ(workspace_names_in(dir), (std::vector<std::string>{"default", "exp"}));
}

TEST(WorkspaceProjects, RemoveFollowsNoSymlinkAndReachesAnyDepth) {
  TempDir t;
  const sfs::path dir = t.path / "peer";
  sfs::create_directories(dir);
  ASSERT_TRUE(adopt_workspaces_folder(dir));
  write(t.path / "outside" / "keep.txt", "keep");
  sfs::path deep = dir / "exp";
  for (int i = 0; i < 300; ++i) deep /= "d";
  write(deep / "x", "x");
  sfs::create_directory_symlink(t.path / "outside", dir / "exp" / "escape");
  sfs::create_directories(dir / "exp" / "ro");
  write(dir / "exp" / "ro" / "f", "f");
  sfs::permissions(dir / "exp" / "ro", sfs::perms::owner_read | sfs::perms::owner_exec);
  ASSERT_TRUE(remove_workspace(dir, "exp"));
  EXPECT_FALSE(sfs::exists(dir / "exp"));
  EXPECT_EQ(read(t.path / "outside" / "keep.txt"), "keep");
  EXPECT_TRUE(sfs::is_empty(dir) || workspace_names_in(dir).empty());
  auto again = remove_workspace(dir, "exp");
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().is(errc::not_found));
  EXPECT_FALSE(remove_workspace(dir, ".."));
}

TEST(WorkspaceProjects, BusyWhileACommandRuns) {
  TempDir t;
  const sfs::path dir = t.path / "peer";
  sfs::create_directories(dir);
  ASSERT_TRUE(adopt_workspaces_folder(dir));
  sfs::create_directories(dir / "exp");
  {
    auto use = WorkspaceUses::begin(dir / "exp");
    auto second = WorkspaceUses::begin(dir / "exp");
    second.reset();
    auto refused = remove_workspace(dir, "exp");
    ASSERT_FALSE(refused);
    EXPECT_TRUE(refused.error().is(errc::refused));
    auto listed = summarize_workspaces(dir);
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_TRUE(listed[0].in_use);
  }
  auto removed = remove_workspace(dir, "exp");
  EXPECT_TRUE(removed) << removed.error().what();
}

TEST(WorkspaceProjects, AtMostAHundredPerConsumer) {
  TempDir t;
  ::setenv("RUNSNACK_HOME", t.path.c_str(), 1);
  const std::array<std::uint8_t, 32> raw{};
  const PeerId consumer = PeerId::from_raw_public_key(raw);
  const RunTerms terms;
  for (std::size_t i = 0; i < kMaxWorkspacesPerConsumer; ++i) {
    std::string name = "w";
    name += std::to_string(i);  // not "w" + ...: GCC 12's -Wrestrict misfires on that at -O2
    ASSERT_TRUE(prepare_workspace(consumer, "abcdefghij", name, terms)) << i;
  }
  auto one_more = prepare_workspace(consumer, "abcdefghij", "one-more", terms);
  ASSERT_FALSE(one_more);
  EXPECT_TRUE(one_more.error().is(errc::exhausted));
  EXPECT_NE(one_more.error().what().find("--remove NAME"), std::string::npos);
  auto existing = prepare_workspace(consumer, "abcdefghij", "w7", terms);  // one already there is still used
  ASSERT_TRUE(existing);
  EXPECT_EQ(existing->path, t.path / "workspaces" / consumer.str() / "w7");  // no quota: the consumer's folder
  ::unsetenv("RUNSNACK_HOME");
}

TEST(WorkspaceProjects, ALinkIdNeverLeavesTheWorkspacesFolder) {
  TempDir t;
  ::setenv("RUNSNACK_HOME", t.path.c_str(), 1);
  auto ok = link_workspaces_for("abcdefghij");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, t.path / "workspaces" / "link-abcdefghij");
  for (const char* bad : {"", "..", "../x", "a/b", "abc.def", "a b"}) EXPECT_FALSE(link_workspaces_for(bad)) << bad;
  ::unsetenv("RUNSNACK_HOME");
}

TEST(WorkspaceProjects, SyncStateLivesInsideTheConsumersFolder) {
  // Inside the folder the quota image is mounted on, where no workspace (no command) reaches it.
  EXPECT_EQ(sync_state_base("/s/workspaces/P", "default"), sfs::path("/s/workspaces/P/.runsnack-sync/default"));
  EXPECT_EQ(sync_state_base("/s/workspaces/P", "exp"), sfs::path("/s/workspaces/P/.runsnack-sync/exp"));
  EXPECT_FALSE(checked_workspace_name(".runsnack-sync"));
}

TEST(WorkspaceProjects, RemovingAWorkspaceRemovesItsSyncState) {
  TempDir t;
  const sfs::path dir = t.path / "peer";
  sfs::create_directories(dir);
  ASSERT_TRUE(adopt_workspaces_folder(dir));
  sfs::create_directories(dir / "exp");
  for (const char* suffix : {".manifest", ".hashes"}) {
    write(sync_state_base(dir, "exp").string() + suffix, "state");
    write(sync_state_base(dir, "other").string() + suffix, "state");
  }
  EXPECT_EQ(workspace_names_in(dir), std::vector<std::string>{"exp"});  // the state's folder is none
  ASSERT_TRUE(remove_workspace(dir, "exp"));
  EXPECT_FALSE(sfs::exists(sync_state_base(dir, "exp").string() + ".manifest"));
  EXPECT_FALSE(sfs::exists(sync_state_base(dir, "exp").string() + ".hashes"));
  EXPECT_TRUE(sfs::exists(sync_state_base(dir, "other").string() + ".manifest"));
}

TEST(WorkspaceProjects, StatesAnEarlierVersionKeptBesideTheImageAreRemoved) {
  TempDir t;
  const sfs::path dir = t.path / "workspaces" / "PEER";
  sfs::create_directories(dir);
  for (const char* name : {"PEER.sync.manifest", "PEER.sync.hashes", "PEER.sync.exp.manifest", "PEER.sync.exp.hashes",
                           "PEER.sync.exp.manifest.tmp", "PEERX.sync.manifest", "PEER.img", "OTHER.sync.manifest"})
    write(t.path / "workspaces" / name, "x");
  remove_earlier_sync_states(dir);
  std::vector<std::string> left;
  for (const auto& e : sfs::directory_iterator(t.path / "workspaces")) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"OTHER.sync.manifest", "PEER", "PEER.img", "PEERX.sync.manifest"}));
}

}  // namespace
}  // namespace runsnack::exec
