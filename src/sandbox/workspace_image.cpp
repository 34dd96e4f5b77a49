#include "sandbox/workspace_image.hpp"

#include "sandbox/run_terms.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace runsnack::exec {

namespace sfs = std::filesystem;

namespace {

// ext4's own floor, with room for its metadata.
constexpr std::uint64_t kMinImageBytes = 4 << 20;

Result<void> unmount(const sfs::path& dir, ImageMounter mounter) {
  if (mounter == ImageMounter::fuse2fs) return run_tool({"fusermount3", "-u", "-z", dir.string()});
  if (::umount2(dir.c_str(), MNT_DETACH) != 0) return fail(errc::io_error, std::strerror(errno));
  return {};
}

bool empty_dir(const sfs::path& dir) {
  std::error_code ec;
  return !sfs::exists(dir, ec) || sfs::is_empty(dir, ec);
}

std::uint64_t image_size(const sfs::path& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

Result<void> make_image(const sfs::path& dir, const sfs::path& img, std::uint64_t bytes, uid_t uid, gid_t gid) {
  const bool populate = !empty_dir(dir);
  {
    int fd = ::open(img.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail(errc::io_error, "cannot create " + img.string() + ": " + std::strerror(errno));
    const bool sized = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    ::close(fd);
    if (!sized) {
      ::unlink(img.c_str());
      return fail(errc::io_error, "cannot size " + img.string() + ": " + std::strerror(errno));
    }
  }
  // 4 KiB blocks (files up to 16 TiB, sparse ones included), no reserved blocks, no journal (a
  // scratch workspace: the space is the consumer's), every inode table written now (so that the
  // image's use of the host disk does not grow later on its own).
  // A copied workspace keeps its files' owners (and its root's): launch.hpp's ensure_owned then
  // hands the whole tree to the sandbox uid, which it does only when the root is not its yet.
  const std::string owner = (populate ? std::string() : "root_owner=" + std::to_string(uid) + ":" + std::to_string(gid) + ",") +
                            "lazy_itable_init=0,lazy_journal_init=0,nodiscard";
  std::vector<std::string> mkfs = {"mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-O", "^has_journal", "-E", owner};
  if (populate) mkfs.insert(mkfs.end(), {"-d", dir.string()});
  mkfs.push_back(img.string());
  if (auto r = run_tool(mkfs); !r) {
    ::unlink(img.c_str());
    if (!populate) return r.error();
    // The tool's words are the provider's to read; the consumer is told what to do.
    spdlog::warn("workspace {}: no image of {} holds its files: {}", dir.string(), size_text(bytes), r.error().what());
    return fail(errc::too_large, "the workspaces on this link hold " + size_text(allocated_bytes(dir)) + ", more than its " +
                                     size_text(bytes) + " disk quota: list them with `runsnack workspaces LINK` and "
                                     "remove some (--remove NAME), or ask the provider to raise --disk-quota");
  }
  if (populate) {
    // Now inside the image: the copies underneath the mount would only take host disk.
    std::error_code ec;
    for (const auto& e : sfs::directory_iterator(dir, ec)) sfs::remove_all(e.path(), ec);
  }
  return {};
}

// A larger quota: grow the (unmounted) image to it.
Result<void> grow_image(const sfs::path& img, std::uint64_t bytes) {
  if (::truncate(img.c_str(), static_cast<off_t>(bytes)) != 0)
    return fail(errc::io_error, "cannot grow " + img.string() + ": " + std::strerror(errno));
  (void)run_tool({"e2fsck", "-f", "-p", img.string()});  // resize2fs wants a checked filesystem
  return run_tool({"resize2fs", img.string()});
}

}  // namespace

std::optional<std::string> find_tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"})
    if (std::string exe = dir + name; ::access(exe.c_str(), X_OK) == 0) return exe;
  return std::nullopt;
}

std::optional<ImageMounter> image_mounter(std::string* why) {
  auto no = [why](std::string text) -> std::optional<ImageMounter> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (::geteuid() == 0) return ImageMounter::kernel;
  if (!find_tool("fuse2fs")) return no("fuse2fs is not installed (apt install fuse2fs fuse3)");
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return no(std::string("/dev/fuse is closed to this user: ") + std::strerror(errno));
  ::close(fd);
  // The setuid fusermount3 mounts for any user, unless this process has no_new_privs (then setuid gains nothing).
  std::string setuid_why;
  auto fusermount = find_tool("fusermount3");
  struct stat st{};
  if (!fusermount || ::stat(fusermount->c_str(), &st) != 0 || st.st_uid != 0 || !(st.st_mode & S_ISUID))
    setuid_why = "fusermount3 is missing or not setuid root (apt install fuse3)";
  else if (::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
    setuid_why = "this provider runs with no_new_privs (e.g. systemd's NoNewPrivileges=yes), so fusermount3 cannot mount";
  if (setuid_why.empty()) return ImageMounter::fuse2fs;
  // Else fuse2fs mounts the image itself, in a user namespace of its own.
  if (std::string ns_why; !user_namespaces_usable(&ns_why)) return no(setuid_why + ", and " + ns_why);
  return ImageMounter::fuse2fs_namespace;
}

std::string quota_mode_name(ImageMounter m) {
  switch (m) {
    case ImageMounter::kernel: return "ext4 image";
    case ImageMounter::fuse2fs: return "ext4 image (fuse2fs)";
    case ImageMounter::fuse2fs_namespace: return "ext4 image (fuse2fs, namespace)";
  }
  return "ext4 image";
}

WorkspaceImages& WorkspaceImages::instance() {
  static WorkspaceImages images;
  return images;
}

WorkspaceImages::~WorkspaceImages() {
  for (auto& [dir, m] : mounted_) {
    if (m.ns) {
      end_namespace_mount(*m.ns, image_path(dir));  // its namespace, and the mount in it, end with it
      continue;
    }
    if (auto r = unmount(dir, m.mounter); !r) spdlog::warn("cannot unmount {}: {}", dir.string(), r.error().what());
  }
}

Result<WorkspaceImages::Image> WorkspaceImages::ensure(const sfs::path& dir, std::uint64_t quota_bytes, uid_t uid,
                                                      gid_t gid, ImageMounter mounter) {
  std::lock_guard lock(mu_);
  const std::uint64_t want = std::max(quota_bytes, kMinImageBytes);
  const sfs::path img = image_path(dir);
  auto in_force = [](const Mounted& m) { return Image{m.size, m.ns ? m.ns->pid : 0}; };
  if (auto it = mounted_.find(dir); it != mounted_.end()) {
    if (!it->second.ns || still_running(*it->second.ns)) return in_force(it->second);
    spdlog::warn("workspace {}: its fuse2fs has ended; mounting the image again", dir.string());
    end_namespace_mount(*it->second.ns, img);
    mounted_.erase(it);
  }
  struct stat st{};
  if (mounter == ImageMounter::fuse2fs && ::stat(dir.c_str(), &st) != 0 && errno == ENOTCONN)
    (void)unmount(dir, mounter);  // its fuse2fs died with a provider that was killed
  if (is_mount_point(dir)) {  // left by a provider that was killed
    mounted_[dir] = {image_size(img), mounter == ImageMounter::fuse2fs_namespace ? ImageMounter::fuse2fs : mounter, {}};
    return in_force(mounted_[dir]);
  }
  if (mounter == ImageMounter::fuse2fs_namespace)
    if (auto left = left_namespace_mount(img)) {  // its provider was killed, and it outlived it
      if (is_mount_point(seen_through(left->pid, dir))) {
        mounted_[dir] = {image_size(img), mounter, left};
        return in_force(mounted_[dir]);
      }
      end_namespace_mount(*left, img);  // never two fuse2fs on one image
    }
  std::error_code ec;
  if (!sfs::exists(img, ec)) {
    if (auto r = make_image(dir, img, want, uid, gid); !r) return r.error();
  } else if (image_size(img) < want) {
    if (auto r = grow_image(img, want); !r) return r.error();
  } else if (image_size(img) > want) {
    spdlog::info("workspace {}: its image ({}) is larger than the quota now in force ({}); it is kept as it is",
                 dir.string(), size_text(image_size(img)), size_text(want));
  }
  sfs::create_directories(dir, ec);
  if (mounter == ImageMounter::fuse2fs_namespace) {
    auto ns = mount_in_namespace(img, dir);  // libfuse mounts nosuid,nodev
    if (!ns) return Error(ns.error().code, "cannot mount the workspace image: " + ns.error().what());
    mounted_[dir] = {image_size(img), mounter, *ns};
    return in_force(mounted_[dir]);
  }
  // fusermount3 adds nosuid,nodev for a user's mount.
  auto mounted = mounter == ImageMounter::kernel
                     ? run_tool({"mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime", img.string(), dir.string()})
                     : run_tool({"fuse2fs", img.string(), dir.string(), "-o", "rw"});
  if (!mounted) return Error(mounted.error().code, "cannot mount the workspace image: " + mounted.error().what());
  mounted_[dir] = {image_size(img), mounter, {}};
  return in_force(mounted_[dir]);
}

Result<void> WorkspaceImages::retire(const sfs::path& dir, ImageMounter mounter) {
  std::lock_guard lock(mu_);
  const sfs::path img = image_path(dir);
  if (auto it = mounted_.find(dir); it != mounted_.end()) {
    if (it->second.ns) {
      end_namespace_mount(*it->second.ns, img);
    } else if (auto r = unmount(dir, it->second.mounter); !r) {
      return r.error();
    }
    mounted_.erase(it);
  } else if (auto left = mounter == ImageMounter::fuse2fs_namespace ? left_namespace_mount(img) : std::nullopt) {
    end_namespace_mount(*left, img);
  } else if (is_mount_point(dir)) {
    if (auto r = unmount(dir, mounter == ImageMounter::fuse2fs_namespace ? ImageMounter::fuse2fs : mounter); !r)
      return r.error();
  }
  std::error_code ec;
  sfs::remove(img, ec);
  if (ec) return fail(errc::io_error, "cannot delete " + img.string() + ": " + ec.message());
  return {};
}

sfs::path image_path(const sfs::path& dir) {
  sfs::path img = dir;
  img += ".img";
  return img;
}

bool is_mount_point(const sfs::path& dir) {
  struct stat self{}, parent{};
  const sfs::path up = dir.lexically_normal().parent_path();
  if (::stat(dir.c_str(), &self) != 0 || ::stat(up.c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

std::optional<std::uint64_t> free_bytes(const sfs::path& dir) {
  struct statvfs v{};
  if (::statvfs(dir.c_str(), &v) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
}

namespace {
thread_local std::uint64_t g_allocated = 0;
thread_local dev_t g_allocated_dev = 0;
int count_blocks(const char*, const struct stat* st, int flag, struct FTW*) {
  if (flag != FTW_NS && st->st_dev == g_allocated_dev) g_allocated += static_cast<std::uint64_t>(st->st_blocks) * 512;
  return 0;
}
}  // namespace

std::uint64_t allocated_bytes(const sfs::path& dir) {
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return 0;
  g_allocated = 0;
  g_allocated_dev = st.st_dev;
  ::nftw(dir.c_str(), count_blocks, 32, FTW_PHYS | FTW_MOUNT);
  return g_allocated;
}

Result<void> run_tool(const std::vector<std::string>& argv) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return fail(errc::io_error, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The tools live in sbin, which a provider's PATH may not name.
  std::string path_env = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  pid_t pid = -1;
  int err = ENOENT;
  if (auto exe = find_tool(argv[0])) err = ::posix_spawn(&pid, exe->c_str(), &actions, nullptr, args.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (err != 0) {
    ::close(out[0]);
    return fail(errc::unsupported, argv[0] + ": " + std::strerror(err) + " (install e2fsprogs and util-linux; fuse2fs and fuse3 for a provider that is not root)");
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (text.size() < 4096) text.append(buf, static_cast<std::size_t>(std::min<ssize_t>(n, 4096)));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return fail(errc::io_error, argv[0] + " failed" + (text.empty() ? "" : ": " + text));
}

}  // namespace runsnack::exec
