#pragma once
// A workspace image mounted by fuse2fs in namespaces of its own, for a
// provider that cannot use the setuid fusermount3: one with no_new_privs (the
// Debian unit's NoNewPrivileges=yes, also implied by RestrictSUIDSGID and
// others), where a setuid program gains nothing.
//
// no_new_privs does not keep a process from making a user namespace. fuse2fs
// starts in a new user namespace (this uid and gid mapped to themselves, so
// nothing in it believes it is root) and a mount namespace owned by it, with
// CAP_SYS_ADMIN there as an ambient capability, so that libfuse's mount(2)
// succeeds (FUSE may be mounted inside a user namespace since Linux 4.18).
// The mount exists only in that namespace, which lives as long as fuse2fs
// does: when fuse2fs ends (SIGTERM: it writes the filesystem out first), the
// mount goes with it, and no one else ever sees it.
//
// The provider reaches the workspace through /proc/<fuse2fs pid>/root/<path>
// (`seen_through`), and starts each command's bwrap in fuse2fs's user and
// mount namespaces (SpawnOptions::userns_fd): bwrap cannot bind a mount of
// another mount namespace ("Race condition binding dirfd: Invalid argument").
//
// fuse2fs gets SIGTERM when the thread that started it ends (the offload
// pool's, which lives as long as the process): a provider killed outright
// takes its images' mounts with it. A record beside the image
// (<image>.fuse2fs: pid and start time) lets the next provider find a
// fuse2fs that was left anyway, and use or end it.

#include "core/error.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace runsnack::exec {

struct NamespaceMount {
  pid_t pid = -1;               // the fuse2fs
  std::uint64_t start_time = 0;  // in clock ticks since boot (/proc/<pid>/stat): tells a reused pid apart
  bool child = false;            // started by this process (else: left by one that was killed)
};

// Whether this process may make a user namespace and a mount namespace in it (a forked child
// tries); `why` says what refused it. Asked once per process.
bool user_namespaces_usable(std::string* why = nullptr);

// Starts fuse2fs on `image` at `dir` in namespaces of its own and returns once the image is
// mounted there (a few hundred ms), or fails with what fuse2fs said. Writes the record.
Result<NamespaceMount> mount_in_namespace(const std::filesystem::path& image, const std::filesystem::path& dir);
// The fuse2fs of `image` named by its record when it still runs: left by a provider that was killed.
std::optional<NamespaceMount> left_namespace_mount(const std::filesystem::path& image);
// Whether `m`'s fuse2fs still runs (a child that ended is reaped).
bool still_running(NamespaceMount& m);
// Ends `m`'s fuse2fs (SIGTERM; SIGKILL after 10 s) and waits for it, then removes the record.
void end_namespace_mount(NamespaceMount& m, const std::filesystem::path& image);
// `path` as this process reaches it in the mount namespace of `holder` (0: its own).
std::filesystem::path seen_through(pid_t holder, const std::filesystem::path& path);

}  // namespace runsnack::exec
