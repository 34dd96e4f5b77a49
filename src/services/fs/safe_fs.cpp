#include "services/fs/safe_fs.hpp"

#include "services/fs/path_rules.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

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

namespace {

Error sys_error(const std::string& what) {
  int e = errno;
  if (e == ELOOP || e == ENOTDIR)
    return fail(errc::refused, what + ": a symlink or non-folder is in the way (symlinks are not followed)");
  return fail(errc::io_error, what + ": " + std::strerror(e));
}

std::int64_t mtime_ns(const struct stat& st) {
  return std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

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

Result<UniqueFd> open_parent(int root, const std::string& path, bool create, std::string* leaf) {
  auto parts = split_relative_path(path);
  if (!parts) return parts.error();
  UniqueFd dir(::dup(root));
  if (!dir) return sys_error("dup");
  for (std::size_t i = 0; i + 1 < parts->size(); ++i) {
    const std::string& name = (*parts)[i];
    int fd = ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + path);
      fd = ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) return sys_error("open " + path);
    dir = UniqueFd(fd);
  }
  if (leaf) *leaf = parts->back();
  return dir;
}

Result<UniqueFd> open_dir(int root, const std::string& path, bool create) {
  if (path.empty()) {
    UniqueFd d(::dup(root));
    if (!d) return sys_error("dup");
    return d;
  }
  std::string leaf;
  auto parent = open_parent(root, path, create, &leaf);
  if (!parent) return parent.error();
  if (create && ::mkdirat(parent->get(), leaf.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + path);
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

Result<std::string> sha256_fd(int fd) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("read");
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(n));
  }
  unsigned char md[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) out += hex[md[i] >> 4], out += hex[md[i] & 15];
  return out;
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

void HashCache::load(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return;
  for (auto& [k, v] : j.items()) {
    if (!v.is_array() || v.size() != 3 || !v[0].is_number_unsigned() || !v[1].is_number_integer() || !v[2].is_string())
      continue;
    items_[k] = {v[0].get<std::uint64_t>(), v[1].get<std::int64_t>(), v[2].get<std::string>()};
  }
}

void HashCache::save(const std::filesystem::path& file) const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : items_) j[k] = {v.size, v.mtime_ns, v.sha};
  auto tmp = file;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump();
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
}

std::optional<std::string> HashCache::find(const std::string& path, std::uint64_t size, std::int64_t mtime) const {
  auto it = items_.find(path);
  if (it == items_.end() || it->second.size != size || it->second.mtime_ns != mtime) return std::nullopt;
  return it->second.sha;
}

void HashCache::put(const std::string& path, std::uint64_t size, std::int64_t mtime, std::string sha) {
  items_[path] = {size, mtime, std::move(sha)};
}

namespace {

std::optional<Entry> entry_at(int dirfd, const std::string& name, const std::string& rel, HashCache* cache) {
  struct stat st{};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  Entry e;
  e.path = rel;
  if (S_ISDIR(st.st_mode)) {
    e.type = EntryType::dir;
  } else if (S_ISLNK(st.st_mode)) {
    e.type = EntryType::link;
    char buf[kMaxPathBytes + 1];
    ssize_t n = ::readlinkat(dirfd, name.c_str(), buf, sizeof buf - 1);
    if (n < 0) return std::nullopt;
    e.target.assign(buf, static_cast<std::size_t>(n));
  } else if (S_ISREG(st.st_mode)) {
    e.type = EntryType::file;
    e.size = static_cast<std::uint64_t>(st.st_size);
    e.executable = (st.st_mode & S_IXUSR) != 0;
    if (auto hit = cache ? cache->find(rel, e.size, mtime_ns(st)) : std::nullopt) {
      e.sha256 = *hit;
    } else {
      int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) return std::nullopt;
      UniqueFd guard(fd);
      auto sha = sha256_fd(fd);
      if (!sha) return std::nullopt;
      e.sha256 = *sha;
      if (cache) cache->put(rel, e.size, mtime_ns(st), e.sha256);
    }
  } else {
    return std::nullopt;  // sockets, fifos, devices never travel
  }
  return e;
}

Result<void> walk(int dirfd, const std::string& rel, const IgnoreRules& rules, HashCache* cache,
                  std::vector<Entry>& out) {
  int fd = ::dup(dirfd);
  if (fd < 0) return sys_error("dup");
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return sys_error("opendir " + rel);
  }
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(d)) {
    std::string name = ent->d_name;
    if (name != "." && name != ".." && !name.starts_with(".runsnack-part-")) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    std::string path = rel.empty() ? name : rel + "/" + name;
    auto e = entry_at(dirfd, name, path, cache);
    if (!e || rules.ignored(path, e->type == EntryType::dir)) continue;
    if (out.size() >= kMaxManifestEntries) return fail(errc::too_large, "more than 200000 files to sync");
    out.push_back(*e);
    if (e->type == EntryType::dir) {
      int sub = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      UniqueFd guard(sub);
      if (auto r = walk(sub, path, rules, cache, out); !r) return r;
    }
  }
  return {};
}

}  // namespace

Result<std::vector<Entry>> scan_tree(int root, const std::string& prefix, const IgnoreRules& rules, HashCache* cache) {
  std::vector<Entry> out;
  if (prefix.empty()) {
    if (auto r = walk(root, "", rules, cache, out); !r) return r.error();
    return out;
  }
  std::string leaf;
  auto dir = open_parent(root, prefix, false, &leaf);
  if (!dir) return dir.error();
  auto e = entry_at(dir->get(), leaf, prefix, cache);
  if (!e) return fail(errc::not_found, prefix + ": no such file or folder");
  out.push_back(*e);
  if (e->type == EntryType::dir) {
    int sub = ::openat(dir->get(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) return sys_error("open " + prefix);
    UniqueFd guard(sub);
    if (auto r = walk(sub, prefix, rules, cache, out); !r) return r.error();
  }
  return out;
}

std::optional<Entry> stat_entry(int root, const std::string& path, HashCache* cache) {
  std::string leaf;
  auto dir = open_parent(root, path, false, &leaf);
  if (!dir) return std::nullopt;
  return entry_at(dir->get(), leaf, path, cache);
}

Result<AtomicFile> AtomicFile::create(int root, const std::string& path) {
  AtomicFile f;
  auto dir = open_parent(root, path, true, &f.leaf_);
  if (!dir) return dir.error();
  f.dir_ = std::move(*dir);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char name[64];
  std::snprintf(name, sizeof name, ".runsnack-part-%016llx", static_cast<unsigned long long>(rng()));
  f.temp_ = name;
  int fd = ::openat(f.dir_.get(), f.temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return sys_error("create " + path);
  f.fd_ = UniqueFd(fd);
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
  }
  return {};
}

Result<std::int64_t> AtomicFile::commit(bool executable) {
  ::fchmod(fd_.get(), executable ? 0755 : 0644);
  struct stat written{};
  ::fstat(fd_.get(), &written);
  struct stat st{};
  if (::fstatat(dir_.get(), leaf_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    return fail(errc::refused, leaf_ + " is a folder on the other side");
  if (::renameat(dir_.get(), temp_.c_str(), dir_.get(), leaf_.c_str()) != 0) return sys_error("rename " + leaf_);
  committed_ = true;
  return mtime_ns(written);
}

Result<void> make_dir(int root, const std::string& path) {
  std::string leaf;
  auto dir = open_parent(root, path, true, &leaf);
  if (!dir) return dir.error();
  if (::mkdirat(dir->get(), leaf.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + path);
  return {};
}

Result<void> make_symlink(int root, const std::string& path, const std::string& target) {
  std::string leaf;
  auto dir = open_parent(root, path, true, &leaf);
  if (!dir) return dir.error();
  struct stat st{};
  if (::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return fail(errc::refused, path + " is a folder on the other side");
    ::unlinkat(dir->get(), leaf.c_str(), 0);
  }
  if (::symlinkat(target.c_str(), dir->get(), leaf.c_str()) != 0) return sys_error("symlink " + path);
  return {};
}

}  // namespace runsnack::fs
