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

namespace {

Error sys_error(const std::string& what) {
  int e = errno;
  if (e == ELOOP || e == ENOTDIR)
    return fail(errc::refused, what + ": a symlink or non-folder is in the way (symlinks are not followed)");
  if (e == ENOSPC || e == EDQUOT || e == EFBIG) return fail(errc::exhausted, what + ": " + std::strerror(e));
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

std::int64_t wall_clock_ns() {
  struct timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

// One read for the whole file (a 16k-entry cache is over a megabyte).
bool read_whole_file(const std::filesystem::path& file, std::string& bytes) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st{};
  if (!fd || ::fstat(fd.get(), &st) != 0) return false;
  bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return true;
}

// Cache file: "RSH2" u32 count, then per entry: u16 path_len, path, u64 size, i64 mtime, i64 ctime,
// u64 ino, i64 as_of, 32 bytes SHA-256 (host byte order: the file never leaves this machine).
// 2: content digests (content_digest.hpp); a cache of plain SHA-256 (1) loads as empty.
constexpr char kCacheMagic[4] = {'R', 'S', 'H', '2'};

}  // namespace

FileStamp stamp_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_size), mtime_ns(st),
          std::int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec, static_cast<std::uint64_t>(st.st_ino)};
}

void HashCache::load(const std::filesystem::path& file) {
  items_.clear();
  index_.clear();
  indexed_ = false;
  next_ = 0;
  dirty_ = false;
  std::string bytes;
  if (!read_whole_file(file, bytes)) return;
  std::size_t at = 0;
  auto take = [&](void* out, std::size_t n) {
    if (bytes.size() - at < n) return false;
    std::memcpy(out, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[4];
  std::uint32_t count = 0;
  if (!take(magic, 4) || std::memcmp(magic, kCacheMagic, 4) != 0 || !take(&count, 4)) return;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint16_t len = 0;
    Item item;
    if (!take(&len, 2) || bytes.size() - at < len) return items_.clear();
    item.path.assign(bytes, at, len);
    at += len;
    if (!take(&item.stamp.size, 8) || !take(&item.stamp.mtime_ns, 8) || !take(&item.stamp.ctime_ns, 8) ||
        !take(&item.stamp.ino, 8) || !take(&item.as_of_ns, 8) || !take(item.sha.data(), 32))
      return items_.clear();
    items_.push_back(std::move(item));
  }
}

void HashCache::save(const std::filesystem::path& file) {
  if (!dirty_) return;
  std::string out(kCacheMagic, 4);
  auto put_raw = [&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); };
  const auto count = static_cast<std::uint32_t>(items_.size());
  put_raw(&count, 4);
  for (const auto& item : items_) {
    const auto len = static_cast<std::uint16_t>(item.path.size());
    put_raw(&len, 2);
    out += item.path;
    put_raw(&item.stamp.size, 8);
    put_raw(&item.stamp.mtime_ns, 8);
    put_raw(&item.stamp.ctime_ns, 8);
    put_raw(&item.stamp.ino, 8);
    put_raw(&item.as_of_ns, 8);
    put_raw(item.sha.data(), 32);
  }
  auto tmp = file;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (!ec) dirty_ = false;
}

void HashCache::index() const {
  if (indexed_) return;
  index_.reserve(items_.size());
  for (std::size_t i = 0; i < items_.size(); ++i) index_[items_[i].path] = i;
  indexed_ = true;
}

bool HashCache::vouches(const std::string& path, const FileStamp& stamp, const std::string& sha_hex) const {
  auto it = index_.find(path);
  if (it == index_.end()) return false;
  const Item& item = items_[it->second];
  std::array<std::uint8_t, 32> sha{};
  return item.stamp == stamp && stamp.ctime_ns + racy_ns_ <= item.as_of_ns && hex_to_bytes(sha_hex, sha.data(), 32) &&
         sha == item.sha;
}

HashCache::Item* HashCache::locate(const std::string& path) const {
  std::size_t at = next_;
  if (at >= items_.size() || items_[at].path != path) {
    index();
    auto it = index_.find(path);
    if (it == index_.end()) return nullptr;
    at = it->second;  // and on sequentially from there: a miss is usually one added or removed entry
  }
  next_ = at + 1;
  return const_cast<Item*>(&items_[at]);
}

std::optional<std::string> HashCache::find(const std::string& path, const FileStamp& stamp) const {
  const Item* item = locate(path);
  if (!item || !(item->stamp == stamp) || stamp.ctime_ns + racy_ns_ > item->as_of_ns) return std::nullopt;
  return bytes_to_hex(item->sha.data(), 32);
}

void HashCache::put(const std::string& path, const FileStamp& stamp, std::string sha, std::int64_t as_of_ns) {
  Item* item = locate(path);
  if (!item) {
    items_.push_back({path, {}, 0, {}});
    item = &items_.back();
    if (indexed_) index_[item->path] = items_.size() - 1;
  }
  item->stamp = stamp;
  item->as_of_ns = as_of_ns;
  hex_to_bytes(sha, item->sha.data(), 32);
  dirty_ = true;
}

void HashCache::retain(const std::vector<Entry>& entries) {
  // Rebuilt in the order of `entries`, so that the next scan finds each item where it looks first.
  std::vector<Item*> keep;
  keep.reserve(items_.size());
  next_ = 0;
  bool same_order = true;
  for (const auto& e : entries) {
    if (e.type != EntryType::file) continue;
    const std::size_t expect = next_;
    Item* item = locate(e.path);
    if (!item) continue;
    same_order &= next_ == expect + 1;
    keep.push_back(item);
  }
  if (!same_order || keep.size() != items_.size()) dirty_ = true;
  std::deque<Item> kept;
  for (Item* item : keep) kept.push_back(std::move(*item));  // index_ is not used from here on
  items_ = std::move(kept);
  index_.clear();
  indexed_ = false;
  next_ = 0;
}

void HashCache::settle() {
  std::int64_t newest = 0;
  for (const auto& item : items_) newest = std::max(newest, item.stamp.ctime_ns);
  std::int64_t now = wall_clock_ns();
  if (newest + racy_ns_ > now) {
    const std::int64_t wait = newest + racy_ns_ - now;
    struct timespec ts{static_cast<time_t>(wait / 1000000000), static_cast<long>(wait % 1000000000)};
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    now = wall_clock_ns();
  }
  for (auto& item : items_)
    if (item.as_of_ns < now) item.as_of_ns = now, dirty_ = true;
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
    const FileStamp stamp = stamp_of(st);
    if (auto hit = cache ? cache->find(rel, stamp) : std::nullopt) {
      e.sha256 = *hit;
    } else {
      const std::int64_t as_of = wall_clock_ns();
      int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) return std::nullopt;
      UniqueFd guard(fd);
      auto sha = content_digest_fd(fd);
      if (!sha) return std::nullopt;
      e.sha256 = *sha;
      if (cache) cache->put(rel, stamp, e.sha256, as_of);
    }
  } else {
    return std::nullopt;  // sockets, fifos, devices never travel
  }
  return e;
}

struct Pending {
  std::size_t index;  // into the scan's entries
  FileStamp stamp;
};

// One folder as the parallel walk found it: its names in sorted order with their stat data.
struct Listed {
  std::string name;
  struct stat st{};
  std::string target;            // symlinks
  std::size_t child = SIZE_MAX;  // folders that are walked: index of their Listing
};

struct Listing {
  std::string rel;  // path from the scan's root ("" for it)
  std::vector<Listed> items;
};

// Opens the folder `rel_below` (slash-separated, may be "") under `base` without following symlinks.
int open_below(int base, const std::string& rel_below) {
  int fd = ::dup(base);
  std::size_t at = 0;
  while (fd >= 0 && at < rel_below.size()) {
    std::size_t slash = rel_below.find('/', at);
    if (slash == std::string::npos) slash = rel_below.size();
    const std::string name = rel_below.substr(at, slash - at);
    int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    fd = sub;
    at = slash + 1;
  }
  return fd;
}

// Reads one folder: names (sorted; temp names of transfers skipped), stat data of each, link targets;
// what `rules` ignores is dropped here so that an ignored folder is never walked.
Result<void> list_dir(int dirfd, Listing& listing, const IgnoreRules& rules) {
  int fd = ::dup(dirfd);
  if (fd < 0) return sys_error("dup");
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return sys_error("opendir " + listing.rel);
  }
  ::rewinddir(d);  // the dup shares the offset of `dirfd`, which an earlier scan left at the end
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(d)) {
    std::string name = ent->d_name;
    if (name != "." && name != ".." && !name.starts_with(".runsnack-part-")) names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  char buf[kMaxPathBytes + 1];
  for (auto& name : names) {
    Listed item;
    if (::fstatat(dirfd, name.c_str(), &item.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const bool dir = S_ISDIR(item.st.st_mode);
    if (!dir && !S_ISREG(item.st.st_mode) && !S_ISLNK(item.st.st_mode)) continue;  // sockets, fifos, devices
    if (S_ISLNK(item.st.st_mode)) {
      ssize_t n = ::readlinkat(dirfd, name.c_str(), buf, sizeof buf - 1);
      if (n < 0) continue;
      item.target.assign(buf, static_cast<std::size_t>(n));
    }
    const std::string path = listing.rel.empty() ? name : listing.rel + "/" + name;
    if (rules.ignored(path, dir)) continue;
    item.name = std::move(name);
    listing.items.push_back(std::move(item));
  }
  return {};
}

// Lists every folder under `base` (which is `base_rel` from the root), a level at a time, the
// folders of a level on several threads: one fstatat per entry is the whole cost of a
// no-change scan, and the kernel serves them in parallel. listings[0] is `base` itself.
Result<std::vector<Listing>> list_tree(int base, const std::string& base_rel, const IgnoreRules& rules) {
  std::vector<Listing> listings(1);
  listings[0].rel = base_rel;
  if (auto r = list_dir(base, listings[0], rules); !r) return r.error();
  std::size_t total = listings[0].items.size();
  const std::size_t max_threads = std::min<std::size_t>(4, std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t level_begin = 0, level_end = 1; level_begin < level_end;) {
    // The next level: every folder of this one, in order.
    const std::size_t next_begin = listings.size();
    std::vector<Listing> level;  // appended after the loop: growing `listings` would move the items it walks
    for (std::size_t i = level_begin; i < level_end; ++i)
      for (auto& item : listings[i].items)
        if (S_ISDIR(item.st.st_mode)) {
          item.child = next_begin + level.size();
          Listing sub;
          sub.rel = listings[i].rel.empty() ? item.name : listings[i].rel + "/" + item.name;
          level.push_back(std::move(sub));
        }
    std::move(level.begin(), level.end(), std::back_inserter(listings));
    const std::size_t next_end = listings.size();
    std::atomic<std::size_t> next{next_begin};
    std::atomic<std::size_t> count{total};
    auto work = [&] {
      for (std::size_t i; (i = next++) < next_end;) {
        Listing& l = listings[i];
        const std::string below = base_rel.empty() ? l.rel : l.rel.substr(base_rel.size() + 1);
        UniqueFd fd(open_below(base, below));
        if (!fd || !list_dir(fd.get(), l, rules)) continue;  // unreadable: listed without its contents, as before
        count += l.items.size();
      }
    };
    const std::size_t threads = std::min(max_threads, next_end - next_begin);
    std::vector<std::thread> helpers;
    for (std::size_t k = 1; k < threads; ++k) helpers.emplace_back(work);
    work();
    for (auto& t : helpers) t.join();
    if (count > kMaxManifestEntries) return fail(errc::too_large, "more than 200000 files to sync");
    total = count;
    level_begin = next_begin;
    level_end = next_end;
  }
  return listings;
}

// The entries of listings[at] and below in manifest order (a folder, then its contents), files
// looked up in `cache` (in this order, which is the order the cache was saved in).
void emit(const std::vector<Listing>& listings, std::size_t at, HashCache* cache, std::vector<Entry>& out,
          std::vector<Pending>& pending) {
  const Listing& l = listings[at];
  for (const auto& item : l.items) {
    Entry e;
    e.path = l.rel.empty() ? item.name : l.rel + "/" + item.name;
    if (S_ISDIR(item.st.st_mode)) {
      e.type = EntryType::dir;
    } else if (S_ISLNK(item.st.st_mode)) {
      e.type = EntryType::link;
      e.target = item.target;
    } else {
      e.type = EntryType::file;
      e.size = static_cast<std::uint64_t>(item.st.st_size);
      e.executable = (item.st.st_mode & S_IXUSR) != 0;
      const FileStamp stamp = stamp_of(item.st);
      if (auto hit = cache ? cache->find(e.path, stamp) : std::nullopt) e.sha256 = std::move(*hit);
      else pending.push_back({out.size(), stamp});
    }
    out.push_back(std::move(e));
    if (item.child != SIZE_MAX) emit(listings, item.child, cache, out, pending);
  }
}

// What a file's data takes, holes not counted.
std::uint64_t data_bytes(const struct stat& st) {
  return std::min(static_cast<std::uint64_t>(st.st_size), static_cast<std::uint64_t>(st.st_blocks) * 512);
}

Error over_limit(std::uint64_t have, std::uint64_t limit) {
  return fail(errc::too_large, "the files hold " + std::to_string(have) + " bytes of data, more than the limit of " +
                                   std::to_string(limit) + " bytes");
}

Result<void> walk(int dirfd, const std::string& rel, const IgnoreRules& rules, HashCache* cache,
                  std::vector<Entry>& out, std::vector<Pending>& pending, std::uint64_t& data,
                  std::optional<std::uint64_t> max_data) {
  auto listings = list_tree(dirfd, rel, rules);
  if (!listings) return listings.error();
  for (const auto& l : *listings)
    for (const auto& item : l.items)
      if (S_ISREG(item.st.st_mode)) data += data_bytes(item.st);
  if (max_data && data > *max_data) return over_limit(data, *max_data);
  emit(*listings, 0, cache, out, pending);
  return {};
}

// Hashes the files the walk left unhashed, on several threads (SHA-256 is the cost of a first
// scan). The stamp and size are taken from the opened file, so they match what was hashed; a
// file gone meanwhile is dropped.
void hash_pending(int root, std::vector<Entry>& out, std::vector<Pending>& pending, HashCache* cache) {
  if (pending.empty()) return;
  std::vector<std::int64_t> as_of(pending.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next++) < pending.size();) {
      Entry& e = out[pending[i].index];
      as_of[i] = wall_clock_ns();
      auto file = open_regular_file(root, e.path);
      struct stat st{};
      if (!file || ::fstat(file->get(), &st) != 0) continue;
      auto sha = content_digest_fd(file->get());
      if (!sha) continue;
      e.sha256 = std::move(*sha);
      e.size = static_cast<std::uint64_t>(st.st_size);
      e.executable = (st.st_mode & S_IXUSR) != 0;
      pending[i].stamp = stamp_of(st);
    }
  };
  const std::size_t threads = std::min<std::size_t>({4, std::max(1u, std::thread::hardware_concurrency()), pending.size()});
  std::vector<std::thread> helpers;
  for (std::size_t k = 1; k < threads; ++k) helpers.emplace_back(work);
  work();
  for (auto& t : helpers) t.join();
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const Entry& e = out[pending[i].index];
    if (cache && !e.sha256.empty()) cache->put(e.path, pending[i].stamp, e.sha256, as_of[i]);
  }
  std::erase_if(out, [](const Entry& e) { return e.type == EntryType::file && e.sha256.empty(); });
}

}  // namespace

Result<std::vector<Entry>> scan_tree(int root, const std::string& prefix, const IgnoreRules& rules, HashCache* cache,
                                     std::optional<std::uint64_t> max_data) {
  std::vector<Entry> out;
  std::vector<Pending> pending;
  std::uint64_t data = 0;
  if (prefix.empty()) {
    if (auto r = walk(root, "", rules, cache, out, pending, data, max_data); !r) return r.error();
    hash_pending(root, out, pending, cache);
    return out;
  }
  std::string leaf;
  auto dir = open_parent(root, prefix, false, &leaf);
  if (!dir) return dir.error();
  struct stat top{};
  if (max_data && ::fstatat(dir->get(), leaf.c_str(), &top, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(top.st_mode)) {
    data = data_bytes(top);
    if (data > *max_data) return over_limit(data, *max_data);
  }
  auto e = entry_at(dir->get(), leaf, prefix, cache);
  if (!e) return fail(errc::not_found, prefix + ": no such file or folder");
  out.push_back(*e);
  if (e->type == EntryType::dir) {
    int sub = ::openat(dir->get(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) return sys_error("open " + prefix);
    UniqueFd guard(sub);
    if (auto r = walk(sub, prefix, rules, cache, out, pending, data, max_data); !r) return r.error();
    hash_pending(root, out, pending, cache);
  }
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

std::optional<Entry> stat_entry(DirCursor& cursor, const std::string& path, HashCache* cache) {
  std::string leaf;
  auto dir = cursor.parent_of(path, false, &leaf);
  if (!dir) return std::nullopt;
  return entry_at(*dir, leaf, path, cache);
}

std::optional<Entry> stat_entry(int root, const std::string& path, HashCache* cache) {
  DirCursor cursor(root);
  return stat_entry(cursor, path, cache);
}

std::optional<FileStamp> stamp_at(DirCursor& cursor, const std::string& path) {
  std::string leaf;
  auto dir = cursor.parent_of(path, false, &leaf);
  struct stat st{};
  if (!dir || ::fstatat(*dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return stamp_of(st);
}

bool tree_unchanged(int root, const std::vector<Entry>& entries, const HashCache& cache) {
  // A stat per entry is the whole cost: the entries are checked in slices on several threads.
  cache.index();
  std::atomic<bool> same{true};
  auto check = [&](std::size_t begin, std::size_t end) {
    DirCursor cursor(root);
    std::string leaf;
    char buf[kMaxPathBytes + 1];
    for (std::size_t i = begin; i < end && same; ++i) {
      const Entry& e = entries[i];
      auto dir = cursor.parent_of(e.path, false, &leaf);
      struct stat st{};
      bool ok = dir && ::fstatat(*dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      if (ok && e.type == EntryType::dir) {
        ok = S_ISDIR(st.st_mode);
      } else if (ok && e.type == EntryType::link) {
        ssize_t n = S_ISLNK(st.st_mode) ? ::readlinkat(*dir, leaf.c_str(), buf, sizeof buf - 1) : -1;
        ok = n >= 0 && e.target == std::string_view(buf, static_cast<std::size_t>(n));
      } else if (ok) {
        ok = S_ISREG(st.st_mode) && ((st.st_mode & S_IXUSR) != 0) == e.executable &&
             cache.vouches(e.path, stamp_of(st), e.sha256);
      }
      if (!ok) same = false;
    }
  };
  const std::size_t threads =
      std::min<std::size_t>({4, std::max(1u, std::thread::hardware_concurrency()), entries.size() / 2048 + 1});
  const std::size_t slice = (entries.size() + threads - 1) / threads;
  std::vector<std::thread> helpers;
  for (std::size_t k = 1; k < threads; ++k)
    helpers.emplace_back(check, std::min(entries.size(), k * slice), std::min(entries.size(), (k + 1) * slice));
  check(0, std::min(entries.size(), slice));
  for (auto& t : helpers) t.join();
  return same;
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
  if (::mkdirat(*dir, leaf.c_str(), 0755) == 0) give(*dir, leaf.c_str(), cursor.owner());
  else if (errno != EEXIST) return sys_error("mkdir " + path);
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
