// HashCache: path -> (stamp, digest), its file format, and the file stamps it trusts.
#include "fs/hash_cache.hpp"

#include "fs/safe_fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace runsnack::fs {

namespace {

std::int64_t mtime_ns(const struct stat& st) {
  return std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

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

bool HashCache::save(const std::filesystem::path& file) {
  if (!dirty_) return true;
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
  std::error_code ec;
  bool written = false;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.close();
    written = !f.fail();
  }
  if (written) std::filesystem::rename(tmp, file, ec);
  if (!written || ec) {
    std::filesystem::remove(tmp, ec);  // cut short, and it takes the room that was missing
    return false;
  }
  dirty_ = false;
  return true;
}

std::size_t HashCache::memory_bytes() const {
  // Heap blocks: a string's own beyond its inline 15 bytes; a hash node and its bucket per index entry.
  constexpr std::size_t kBlockOverhead = 16, kIndexEntryBytes = 56;
  std::size_t bytes = sizeof(*this);
  for (const auto& item : items_) {
    bytes += sizeof(Item);
    if (item.path.capacity() > 15) bytes += item.path.capacity() + 1 + kBlockOverhead;
  }
  if (indexed_) bytes += index_.size() * kIndexEntryBytes;
  return bytes;
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

}  // namespace runsnack::fs
