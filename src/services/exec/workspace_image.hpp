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
// same hard total, slower writes. Where neither can mount (no fuse2fs, no
// fuse3, /dev/fuse closed to this user) the provider measures the workspace
// instead: `image_unavailable()` says why, launch.hpp says which is in force.
// Thread-safe; blocking (mkfs takes up to a second): call it off the io thread.

#include "core/error.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::exec {

enum class ImageMounter { kernel, fuse2fs };

// How this process can mount a workspace image: the kernel as root, fuse2fs
// otherwise; nullopt with `why` filled when it cannot.
std::optional<ImageMounter> image_mounter(std::string* why = nullptr);
// The name of a mounter in the audit log and `started` limits.
std::string quota_mode_name(ImageMounter m);

class WorkspaceImages {
 public:
  static WorkspaceImages& instance();
  ~WorkspaceImages();  // unmounts the images this process mounted

  // The workspace folder `dir` with an image of `quota_bytes` mounted on it.
  // Returns the size of the filesystem in force (the image's, which may be
  // larger than the quota when it was made for a larger one).
  Result<std::uint64_t> ensure(const std::filesystem::path& dir, std::uint64_t quota_bytes, uid_t uid, gid_t gid,
                               ImageMounter mounter);

 private:
  WorkspaceImages() = default;
  struct Mounted {
    std::uint64_t size = 0;
    ImageMounter mounter = ImageMounter::kernel;
  };
  std::mutex mu_;
  std::map<std::filesystem::path, Mounted> mounted_;  // by this process: unmounted at exit
};

// Whether `dir` is the root of a mount (its device differs from its parent's).
bool is_mount_point(const std::filesystem::path& dir);
// Bytes still free for an unprivileged writer on the filesystem holding `dir`.
std::optional<std::uint64_t> free_bytes(const std::filesystem::path& dir);
// Bytes of disk the files under `dir` take (st_blocks), on its filesystem only.
std::uint64_t allocated_bytes(const std::filesystem::path& dir);

// Runs `argv` (looked up in /usr/sbin, /usr/bin, /sbin, /bin) and waits (a
// daemon it starts must let go of its stdout and stderr, as fuse2fs does); its
// output (the first 4 KiB) goes into the error when it fails.
Result<void> run_tool(const std::vector<std::string>& argv);

}  // namespace runsnack::exec
