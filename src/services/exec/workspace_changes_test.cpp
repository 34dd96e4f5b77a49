#include "services/exec/workspace_changes.hpp"

#include "store/temp_dir_for_test.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

namespace runsnack::exec {
namespace {

namespace sfs = std::filesystem;

void write(const sfs::path& p, const std::string& text) {
  sfs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Files before and after `since`: a few clock ticks apart, as a sync and the command it precedes are.
timespec between() {
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  timespec since = change_clock_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  return since;
}

TEST(WorkspaceChanges, CountsWhatChangedAfterTheStartNotFoldersNorWhatWasThere) {
  testing::TempDir ws, outside;
  write(ws.path() / "synced.txt", "in");
  write(ws.path() / "appended.txt", "in");
  write(ws.path() / "deep/old.txt", "in");
  write(outside.path() / "secret.txt", "not the workspace's");
  const timespec since = between();
  write(ws.path() / "out.csv", "1");
  std::ofstream(ws.path() / "appended.txt", std::ios::app) << "more";
  write(ws.path() / "models/v1/model.pt", "2");
  sfs::create_directory(ws.path() / "empty");
  sfs::create_directory_symlink(outside.path(), ws.path() / "escape");  // counted as itself, never followed
  write(outside.path() / "later.txt", "not the workspace's either");

  const WorkspaceChanges c = changes_since(ws.path(), since);
  EXPECT_EQ(c.files, 4u);
  EXPECT_EQ(c.paths, (std::vector<std::string>{"appended.txt", "escape", "models/v1/model.pt", "out.csv"}));
  EXPECT_TRUE(c.complete);
  EXPECT_EQ(to_json(c)["files"], 4);
  EXPECT_EQ(changes_since(ws.path(), change_clock_now()).files, 0u);
}

TEST(WorkspaceChanges, AWalkIsBoundedAndNamesAFew) {
  testing::TempDir ws;
  const timespec since = between();
  for (int i = 0; i < 50; ++i) write(ws.path() / ("f" + std::to_string(i)), "x");
  write(ws.path() / std::string(200, 'd') / std::string(100, 'n'), "a path too long to show");
  const WorkspaceChanges all = changes_since(ws.path(), since, 1000, 5);
  EXPECT_EQ(all.files, 51u);
  EXPECT_EQ(all.paths.size(), 5u);
  EXPECT_TRUE(all.complete);
  const WorkspaceChanges cut = changes_since(ws.path(), since, 10, 5);
  EXPECT_EQ(cut.files, 10u);
  EXPECT_FALSE(cut.complete);
  EXPECT_EQ(changes_since(ws.path() / "missing", since).files, 0u);
}

}  // namespace
}  // namespace runsnack::exec
