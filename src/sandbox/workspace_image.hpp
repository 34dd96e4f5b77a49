#pragma once
// A root provider's --disk-quota: each workspace is an ext4 filesystem of
// exactly the quota's size, in a file beside it (<workspace>.img), mounted on
// the workspace folder (loop, nosuid, nodev, noatime). Whatever fills the
// workspace (a command's many files, sparse files, a sync, a cp) meets the
// end of that filesystem: the host never gives it more than the quota.
//
// An image is made on first use (mkfs.ext4, its root owned by the
// workspace's uid; a workspace that already holds files is copied into it
// with mkfs.ext4 -d) and stays mounted while the provider runs; the provider
// unmounts what it mounted when it exits. A provider killed outright leaves
// the mount, which the next one finds and uses. A larger quota grows the
// image before it is mounted (e2fsck, resize2fs); a smaller one keeps the
// image as it is (files are never dropped) and says so.
//
// Root mounts the image with the kernel's ext4 (mount -o loop). A provider
// that is not root mounts it with fuse2fs (libext2fs in a FUSE daemon of its
// own uid, through the setuid fusermount3, as any user may on Debian): the
// same hard total, slower writes. A provider with no_new_privs (the Debian
// unit), for which the setuid fusermount3 cannot work, has fuse2fs mount it
// in a user and mount namespace of its own (fuse2fs_namespace.hpp): the
// provider then reaches the workspace through /proc/<pid>/root and commands
// start in that namespace. Where none can mount (no fuse2fs, /dev/fuse
// closed to this user, no user namespaces under no_new_privs) the provider
// measures the workspace instead: `image_mounter()` says why, launch.hpp says
// which is in force.
// Thread-safe; blocking (mkfs takes up to a second): call it off the io thread.

#include "core/error.hpp"
#include "sandbox/fuse2fs_namespace.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::exec {

enum class ImageMounter { kernel, fuse2fs, fuse2fs_namespace };

// How this process can mount a workspace image: the kernel as root, fuse2fs
// through fusermount3 otherwise, fuse2fs in a namespace of its own where
// fusermount3 cannot work (no_new_privs); nullopt with `why` filled when none can.
std::optional<ImageMounter> image_mounter(std::string* why = nullptr);
// The name of a mounter in the audit log and `started` limits.
std::string quota_mode_name(ImageMounter m);

class WorkspaceImages {
 public:
  static WorkspaceImages& instance();
  ~WorkspaceImages();  // unmounts the images this process mounted

  struct Image {
    std::uint64_t size = 0;  // of the filesystem in force (may be larger than the quota it was made for)
    pid_t holder = 0;        // fuse2fs_namespace: the fuse2fs whose mount namespace holds it (0: ours)
  };
  // The workspace folder `dir` with an image of `quota_bytes` mounted on it.
  Result<Image> ensure(const std::filesystem::path& dir, std::uint64_t quota_bytes, uid_t uid, gid_t gid,
                       ImageMounter mounter);
  // Unmounts the image on `dir` (mounted by this process or left by a killed one) and deletes it:
  // its files have moved elsewhere (launch.cpp, an earlier version's image per consumer).
  Result<void> retire(const std::filesystem::path& dir, ImageMounter mounter);

 private:
  WorkspaceImages() = default;
  struct Mounted {
    std::uint64_t size = 0;
    ImageMounter mounter = ImageMounter::kernel;
    std::optional<NamespaceMount> ns;  // fuse2fs_namespace
  };
  std::mutex mu_;
  std::map<std::filesystem::path, Mounted> mounted_;  // by this process: unmounted at exit
};

// The image file that is mounted on `dir`: <dir>.img.
std::filesystem::path image_path(const std::filesystem::path& dir);
// Whether `dir` is the root of a mount (its device differs from its parent's).
bool is_mount_point(const std::filesystem::path& dir);
// Bytes still free for an unprivileged writer on the filesystem holding `dir`.
std::optional<std::uint64_t> free_bytes(const std::filesystem::path& dir);
// Bytes of disk the files under `dir` take (st_blocks), on its filesystem only.
std::uint64_t allocated_bytes(const std::filesystem::path& dir);

// Where a tool is: /usr/sbin, /usr/bin, /sbin or /bin.
std::optional<std::string> find_tool(const std::string& name);

// Runs `argv` (looked up in /usr/sbin, /usr/bin, /sbin, /bin) and waits (a
// daemon it starts must let go of its stdout and stderr, as fuse2fs does); its
// output (the first 4 KiB) goes into the error when it fails.
Result<void> run_tool(const std::vector<std::string>& argv);

}  // namespace runsnack::exec
