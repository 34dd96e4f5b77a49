#include "services/exec/workspace_changes.hpp"

#include <algorithm>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace runsnack::exec {

namespace {

// Folders deeper than this are not entered (each open level holds a descriptor).
constexpr int kMaxDepth = 64;

bool after(const timespec& t, const timespec& since) {
  return t.tv_sec > since.tv_sec || (t.tv_sec == since.tv_sec && t.tv_nsec > since.tv_nsec);
}

struct Walk {
  timespec since;
  std::size_t max_entries;
  std::size_t max_named;
  std::size_t seen = 0;
  WorkspaceChanges out;

  // Walks the folder open at `fd` (taken: closed here), whose path is `prefix` ("" or "a/b/").
  void folder(int fd, const std::string& prefix, int depth) {
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      ::close(fd);
      return;
    }
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (++seen > max_entries) {
        out.complete = false;
        break;
      }
      struct stat st {};
      if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
      const std::string path = prefix + name;
      if (S_ISDIR(st.st_mode)) {
        if (depth >= kMaxDepth) continue;
        int sub = ::openat(::dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) folder(sub, path + "/", depth + 1);
        if (!out.complete) break;
        continue;
      }
      if (!after(st.st_ctim, since)) continue;
      ++out.files;
      if (out.paths.size() < max_named && path.size() <= kChangedPathBytes) out.paths.push_back(path);
    }
    ::closedir(dir);
  }
};

}  // namespace

timespec change_clock_now() {
  // The fine clock, not the coarse one that stamps files: a file the sync wrote before now has a
  // time at most now, and the command starts well over a clock tick later than this.
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return now;
}

WorkspaceChanges changes_since(const std::filesystem::path& workspace, const timespec& since, std::size_t max_entries,
                               std::size_t max_named) {
  Walk walk{since, max_entries, max_named, 0, {}};
  int fd = ::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) walk.folder(fd, "", 0);
  std::sort(walk.out.paths.begin(), walk.out.paths.end());
  return walk.out;
}

nlohmann::json to_json(const WorkspaceChanges& changes) {
  return {{"files", changes.files}, {"paths", changes.paths}, {"complete", changes.complete}};
}

}  // namespace runsnack::exec
