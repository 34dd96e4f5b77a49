// Confined opens, reads and writes under a root (safe_fs.hpp).
#include "fs/safe_fs.hpp"

#include "fs/content_digest.hpp"
#include "fs/path_rules.hpp"

#include <memory>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <atomic>
#include <random>
#include <thread>
#include <string_view>
#include <time.h>

namespace runsnack::fs {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Error sys_error(const std::string& what) {
  int e = errno;
  if (e == ELOOP || e == ENOTDIR)
    return fail(errc::refused, what + ": a symlink or non-folder is in the way (symlinks are not followed)");
  if (e == ENOSPC || e == EDQUOT || e == EFBIG) return fail(errc::exhausted, what + ": " + std::strerror(e));
  return fail(errc::io_error, what + ": " + std::strerror(e));
}

Result<UniqueFd> open_root(const std::filesystem::path& path, bool create) {
  if (create) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return fail(errc::io_error, "cannot create " + path.string() + ": " + ec.message());
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sys_error("cannot open " + path.string());
  return UniqueFd(fd);
}

namespace {

void give(int dir, const char* name, const Owner* owner) {
  if (owner) ::fchownat(dir, name, owner->uid, owner->gid, AT_SYMLINK_NOFOLLOW);
}

}  // namespace

Result<UniqueFd> open_parent(int root, const std::string& path, bool create, std::string* leaf, const Owner* owner) {
  auto parts = split_relative_path(path);
  if (!parts) return parts.error();
  UniqueFd dir(::dup(root));
  if (!dir) return sys_error("dup");
  for (std::size_t i = 0; i + 1 < parts->size(); ++i) {
    const std::string& name = (*parts)[i];
    int fd = ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(dir.get(), name.c_str(), 0755) == 0) give(dir.get(), name.c_str(), owner);
      else if (errno != EEXIST) return sys_error("mkdir " + path);
      fd = ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) return sys_error("open " + path);
    dir = UniqueFd(fd);
  }
  if (leaf) *leaf = parts->back();
  return dir;
}

Result<UniqueFd> open_dir(int root, const std::string& path, bool create, const Owner* owner) {
  if (path.empty()) {
    UniqueFd d(::dup(root));
    if (!d) return sys_error("dup");
    return d;
  }
  std::string leaf;
  auto parent = open_parent(root, path, create, &leaf, owner);
  if (!parent) return parent.error();
  if (create) {
    if (::mkdirat(parent->get(), leaf.c_str(), 0755) == 0) give(parent->get(), leaf.c_str(), owner);
    else if (errno != EEXIST) return sys_error("mkdir " + path);
  }
  int fd = ::openat(parent->get(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return sys_error("open " + path);
  return UniqueFd(fd);
}

Result<UniqueFd> open_regular_file(int root, const std::string& path) {
  std::string leaf;
  auto dir = open_parent(root, path, false, &leaf);
  if (!dir) return dir.error();
  int fd = ::openat(dir->get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return sys_error("open " + path);
  UniqueFd file(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return fail(errc::refused, path + " is not a regular file");
  return file;
}

std::optional<std::string> link_target_at(int root, const std::string& path) {
  std::string leaf;
  auto dir = open_parent(root, path, false, &leaf);
  if (!dir) return std::nullopt;
  char buf[kMaxPathBytes + 1];
  const ssize_t n = ::readlinkat(dir->get(), leaf.c_str(), buf, sizeof buf - 1);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

Result<std::size_t> read_full(int fd, std::span<std::uint8_t> buf, std::uint64_t offset, bool positional) {
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = positional ? ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(offset + got))
                           : ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("read");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

std::string sha256_hex(const void* data, std::size_t n) {
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) out += hex[md[i] >> 4], out += hex[md[i] & 15];
  return out;
}

Result<int> DirCursor::parent_of(const std::string& path, bool create, std::string* leaf) {
  const auto slash = path.rfind('/');
  const std::string_view dir = slash == std::string::npos ? std::string_view() : std::string_view(path).substr(0, slash);
  const std::string_view name = slash == std::string::npos ? std::string_view(path) : std::string_view(path).substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return fail(errc::invalid_argument, "refused path '" + path.substr(0, 200) + "'");
  if (!fd_ || dir != dir_) {
    fd_ = UniqueFd();
    auto d = open_dir(root_, std::string(dir), create, owner());
    if (!d) return d.error();
    fd_ = std::move(*d);
    dir_ = dir;
  }
  leaf->assign(name);
  return fd_.get();
}
std::optional<FileStamp> stamp_at(DirCursor& cursor, const std::string& path) {
  std::string leaf;
  auto dir = cursor.parent_of(path, false, &leaf);
  struct stat st{};
  if (!dir || ::fstatat(*dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return stamp_of(st);
}
bool remove_synced(DirCursor& cursor, const Entry& entry, const HashCache& cache) {
  std::string leaf;
  auto dir = cursor.parent_of(entry.path, false, &leaf);
  struct stat st{};
  if (!dir || ::fstatat(*dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (entry.type == EntryType::dir) return S_ISDIR(st.st_mode) && ::unlinkat(*dir, leaf.c_str(), AT_REMOVEDIR) == 0;
  if (entry.type == EntryType::link) return S_ISLNK(st.st_mode) && ::unlinkat(*dir, leaf.c_str(), 0) == 0;
  // A file a command rewrote since the sync put it there belongs to the command now.
  auto sha = S_ISREG(st.st_mode) ? cache.find(entry.path, stamp_of(st)) : std::nullopt;
  return sha && *sha == entry.sha256 && ::unlinkat(*dir, leaf.c_str(), 0) == 0;
}

Result<AtomicFile> AtomicFile::create(int root, const std::string& path) {
  DirCursor cursor(root);
  return create(cursor, path);
}

Result<AtomicFile> AtomicFile::create(DirCursor& cursor, const std::string& path) {
  AtomicFile f;
  auto dir = cursor.parent_of(path, true, &f.leaf_);
  if (!dir) return dir.error();
  f.dir_ = UniqueFd(::dup(*dir));
  if (!f.dir_) return sys_error("dup");
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char name[64];
  std::snprintf(name, sizeof name, ".runsnack-part-%016llx", static_cast<unsigned long long>(rng()));
  f.temp_ = name;
  int fd = ::openat(f.dir_.get(), f.temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return sys_error("create " + path);
  f.fd_ = UniqueFd(fd);
  if (const Owner* o = cursor.owner()) ::fchown(fd, o->uid, o->gid);
  return f;
}

AtomicFile::~AtomicFile() {
  if (fd_ && !committed_) ::unlinkat(dir_.get(), temp_.c_str(), 0);
}

Result<void> AtomicFile::write(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_.get(), p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return sys_error("write " + leaf_);
    p += w, n -= static_cast<std::size_t>(w);
    written_ += static_cast<std::uint64_t>(w);
  }
  return {};
}

Result<void> AtomicFile::skip(std::uint64_t n) {
  if (n == 0) return {};
  if (::lseek(fd_.get(), static_cast<off_t>(n), SEEK_CUR) < 0) return sys_error("seek " + leaf_);
  written_ += n;
  holes_ = true;
  return {};
}

std::string resume_name(const std::string& leaf) {
  return ".runsnack-part-resume-" + sha256_hex(leaf.data(), leaf.size()).substr(0, 24);
}

void AtomicFile::keep_partial() {
  if (!fd_ || committed_) return;
  if (holes_) (void)::ftruncate(fd_.get(), static_cast<off_t>(written_));
  if (::renameat(dir_.get(), temp_.c_str(), dir_.get(), resume_name(leaf_).c_str()) == 0) committed_ = true;
}

Result<void> set_executable(DirCursor& cursor, const std::string& path, bool executable) {
  std::string leaf;
  auto dir = cursor.parent_of(path, false, &leaf);
  if (!dir) return dir.error();
  int fd = ::openat(*dir, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return sys_error("open " + path);
  UniqueFd file(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return fail(errc::refused, path + " is not a regular file");
  // As commit() makes a file: 0755 when executable; otherwise its mode without the x bits.
  const mode_t mode = executable ? 0755 : (st.st_mode & 07777 & ~mode_t(0111));
  if (::fchmod(fd, mode) != 0) return sys_error("chmod " + path);
  return {};
}

Result<FileStamp> AtomicFile::commit(bool executable) {
  // Created 0644 (less the umask, as cp does); only an executable needs another call.
  if (executable) ::fchmod(fd_.get(), 0755);
  if (holes_ && ::ftruncate(fd_.get(), static_cast<off_t>(written_)) != 0) return sys_error("truncate " + leaf_);
  if (::renameat(dir_.get(), temp_.c_str(), dir_.get(), leaf_.c_str()) != 0) {
    if (errno == EISDIR) return fail(errc::refused, leaf_ + " is a folder on the other side");
    return sys_error("rename " + leaf_);
  }
  committed_ = true;
  struct stat written{};  // after the rename, which changes the ctime
  if (::fstat(fd_.get(), &written) != 0) return sys_error("stat " + leaf_);
  return stamp_of(written);
}

Result<void> make_dir(DirCursor& cursor, const std::string& path) {
  std::string leaf;
  auto dir = cursor.parent_of(path, true, &leaf);
  if (!dir) return dir.error();
  if (::mkdirat(*dir, leaf.c_str(), 0755) == 0) {
    give(*dir, leaf.c_str(), cursor.owner());
    return {};
  }
  if (errno != EEXIST) return sys_error("mkdir " + path);
  // A symlink where the sender now has a folder (a link to a folder, replaced by the folder) is
  // replaced, never followed; anything else there stays, and what is written into it says why not.
  struct stat st{};
  if (::fstatat(*dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode)) return {};
  if (::unlinkat(*dir, leaf.c_str(), 0) != 0) return sys_error("replace " + path);
  if (::mkdirat(*dir, leaf.c_str(), 0755) != 0) return sys_error("mkdir " + path);
  give(*dir, leaf.c_str(), cursor.owner());
  return {};
}

Result<void> make_dir(int root, const std::string& path) {
  DirCursor cursor(root);
  return make_dir(cursor, path);
}

Result<void> make_symlink(DirCursor& cursor, const std::string& path, const std::string& target) {
  std::string leaf;
  auto dir = cursor.parent_of(path, true, &leaf);
  if (!dir) return dir.error();
  struct stat st{};
  if (::fstatat(*dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return fail(errc::refused, path + " is a folder on the other side");
    ::unlinkat(*dir, leaf.c_str(), 0);
  }
  if (::symlinkat(target.c_str(), *dir, leaf.c_str()) != 0) return sys_error("symlink " + path);
  give(*dir, leaf.c_str(), cursor.owner());
  return {};
}

Result<void> make_symlink(int root, const std::string& path, const std::string& target) {
  DirCursor cursor(root);
  return make_symlink(cursor, path, target);
}

}  // namespace runsnack::fs
