// scan_tree and the stat-only checks: what a root holds, listed in parallel and hashed.
#include "fs/tree_scan.hpp"

#include "fs/content_digest.hpp"
#include "fs/path_rules.hpp"
#include "fs/read_bounds.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string_view>
#include <thread>

namespace runsnack::fs {

namespace {

// Why an entry could not be sent, from the errno of what failed: words for the user's line.
std::string why_not(int err) {
  if (err == EACCES || err == EPERM) return "permission denied";
  if (err == ELOOP) return "a symlink loop";
  std::string text = std::strerror(err);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// What a scan never sends, named for the user's line.
const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a file, folder or symlink";
}

// With `bounds` (reading for a peer), why a file could not be hashed goes to `why`.
std::optional<Entry> entry_at(int dirfd, const std::string& name, const std::string& rel, HashCache* cache,
                              const ReadBounds* bounds = nullptr, std::optional<Error>* why = nullptr) {
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
      auto sha = content_digest_fd(fd, bounds);
      if (!sha) {
        if (bounds && why) *why = Error(sha.error().code, rel + ": " + sha.error().what());
        return std::nullopt;
      }
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
  // For a ScanReport: what this folder held that is not sent, and why.
  std::vector<ScanReport::Skipped> skipped;
  std::vector<ScanReport::Defaulted> defaulted;
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
    const int err = errno;
    ::close(fd);
    errno = err;  // why `sub` failed, for the caller
    fd = sub;
    at = slash + 1;
  }
  return fd;
}

// Reads one folder: names (sorted; temp names of transfers skipped), stat data of each, link targets;
// what `rules` ignores is dropped here so that an ignored folder is never walked. `reporting`: what
// is not sent is noted in the listing, and symlinks are looked through for loops.
Result<void> list_dir(int dirfd, Listing& listing, const IgnoreRules& rules, bool reporting) {
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
    const std::string path = listing.rel.empty() ? name : listing.rel + "/" + name;
    if (::fstatat(dirfd, name.c_str(), &item.st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (reporting && errno != ENOENT) listing.skipped.push_back({path, why_not(errno)});  // ENOENT: gone meanwhile
      continue;
    }
    const bool dir = S_ISDIR(item.st.st_mode);
    if (rules.ignored(path, dir)) {
      if (const char* what = reporting && dir ? rules.ignored_by_default(path, dir) : nullptr)
        listing.defaulted.push_back({path, what});
      continue;
    }
    if (!dir && !S_ISREG(item.st.st_mode) && !S_ISLNK(item.st.st_mode)) {  // sockets, fifos, devices
      if (reporting) listing.skipped.push_back({path, kind_of(item.st.st_mode)});
      continue;
    }
    if (S_ISLNK(item.st.st_mode)) {
      ssize_t n = ::readlinkat(dirfd, name.c_str(), buf, sizeof buf - 1);
      if (n < 0) {
        if (reporting && errno != ENOENT) listing.skipped.push_back({path, why_not(errno)});
        continue;
      }
      item.target.assign(buf, static_cast<std::size_t>(n));
      // A symlink that points outside travels as it is (rsync -a does the same), whether or not it
      // resolves here; one that can never resolve anywhere is left out and said.
      struct stat through{};
      if (reporting && ::fstatat(dirfd, name.c_str(), &through, 0) != 0 && errno == ELOOP) {
        listing.skipped.push_back({path, "a symlink loop"});
        continue;
      }
    }
    item.name = std::move(name);
    listing.items.push_back(std::move(item));
  }
  return {};
}

// Lists every folder under `base` (which is `base_rel` from the root), a level at a time, the
// folders of a level on several threads: one fstatat per entry is the whole cost of a
// no-change scan, and the kernel serves them in parallel. listings[0] is `base` itself.
Result<std::vector<Listing>> list_tree(int base, const std::string& base_rel, const IgnoreRules& rules,
                                       bool reporting) {
  std::vector<Listing> listings(1);
  listings[0].rel = base_rel;
  if (auto r = list_dir(base, listings[0], rules, reporting); !r) return r.error();
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
        const int err = errno;
        if (!fd) {  // unreadable: sent without its contents
          if (reporting) l.skipped.push_back({l.rel + "/", why_not(err)});
          continue;
        }
        if (auto r = list_dir(fd.get(), l, rules, reporting); !r) {
          if (reporting) l.skipped.push_back({l.rel + "/", r.error().what()});
          continue;
        }
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
                  std::optional<std::uint64_t> max_data, ScanReport* report) {
  auto listings = list_tree(dirfd, rel, rules, report != nullptr);
  if (!listings) return listings.error();
  if (report)
    for (auto& l : *listings) {
      std::move(l.skipped.begin(), l.skipped.end(), std::back_inserter(report->skipped));
      std::move(l.defaulted.begin(), l.defaulted.end(), std::back_inserter(report->defaulted));
    }
  for (const auto& l : *listings)
    for (const auto& item : l.items)
      if (S_ISREG(item.st.st_mode)) data += data_bytes(item.st);
  if (max_data && data > *max_data) return over_limit(data, *max_data);
  emit(*listings, 0, cache, out, pending);
  return {};
}

// Opens a listed file to hash it, no symlink followed; on failure *err is the errno (0: it is no
// longer a regular file).
UniqueFd open_listed_file(int root, const std::string& path, int* err) {
  *err = 0;
  std::string leaf;
  auto dir = open_parent(root, path, false, &leaf);
  if (!dir) {
    *err = ENOENT;  // a folder on its way is gone or was replaced: so is the file, as listed
    return UniqueFd();
  }
  UniqueFd file(::openat(dir->get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!file) *err = errno;
  return file;
}

// Hashes the files the walk left unhashed, on several threads (SHA-256 is the cost of a first
// scan). The stamp and size are taken from the opened file, so they match what was hashed; a
// file gone meanwhile is dropped. With `bounds`, a file refused by them fails the scan (the first
// such error), and so does a stop; without, a file that cannot be read is dropped and, with
// `report`, listed there.
Result<void> hash_pending(int root, std::vector<Entry>& out, std::vector<Pending>& pending, HashCache* cache,
                          const ReadBounds* bounds, ScanReport* report) {
  if (pending.empty()) return {};
  std::vector<std::int64_t> as_of(pending.size());
  std::vector<std::string> why(pending.size());  // of the files that could not be read
  std::atomic<std::size_t> next{0};
  std::mutex failed_mutex;
  std::optional<Error> failed;
  auto work = [&] {
    for (std::size_t i; (i = next++) < pending.size();) {
      if (bounds && bounds->stopped()) {
        next = pending.size();  // the other threads stop at their next file too
        std::lock_guard lock(failed_mutex);
        if (!failed) failed = bounds->stopped_error();
        return;
      }
      Entry& e = out[pending[i].index];
      as_of[i] = wall_clock_ns();
      int err = 0;
      UniqueFd file = open_listed_file(root, e.path, &err);
      struct stat st{};
      if (!file || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        if (err != 0 && err != ENOENT) why[i] = why_not(err);
        continue;
      }
      auto sha = content_digest_fd(file.get(), bounds);
      if (!sha) {
        if (bounds) {
          next = pending.size();
          std::lock_guard lock(failed_mutex);
          if (!failed) failed = Error(sha.error().code, e.path + ": " + sha.error().what());
          return;
        }
        why[i] = "unreadable: " + sha.error().what();
        continue;
      }
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
  if (failed) return *failed;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const Entry& e = out[pending[i].index];
    if (cache && !e.sha256.empty()) cache->put(e.path, pending[i].stamp, e.sha256, as_of[i]);
    if (report && !why[i].empty()) report->skipped.push_back({e.path, std::move(why[i])});
  }
  std::erase_if(out, [](const Entry& e) { return e.type == EntryType::file && e.sha256.empty(); });
  return {};
}

}  // namespace

Result<std::vector<Entry>> scan_tree(int root, const std::string& prefix, const IgnoreRules& rules, HashCache* cache,
                                     std::optional<std::uint64_t> max_data, const ReadBounds* bounds,
                                     ScanReport* report) {
  std::vector<Entry> out;
  std::vector<Pending> pending;
  std::uint64_t data = 0;
  // The listings come a level at a time: the report in path order, as the manifest is.
  auto sort_report = [report] {
    if (!report) return;
    std::sort(report->skipped.begin(), report->skipped.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    std::sort(report->defaulted.begin(), report->defaulted.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  };
  if (prefix.empty()) {
    if (auto r = walk(root, "", rules, cache, out, pending, data, max_data, report); !r) return r.error();
    if (auto r = hash_pending(root, out, pending, cache, bounds, report); !r) return r.error();
    sort_report();
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
  std::optional<Error> why;
  auto e = entry_at(dir->get(), leaf, prefix, cache, bounds, &why);
  if (!e && why) return *why;
  if (!e) return fail(errc::not_found, prefix + ": no such file or folder");
  out.push_back(*e);
  if (e->type == EntryType::dir) {
    int sub = ::openat(dir->get(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) return sys_error("open " + prefix);
    UniqueFd guard(sub);
    if (auto r = walk(sub, prefix, rules, cache, out, pending, data, max_data, report); !r) return r.error();
    if (auto r = hash_pending(root, out, pending, cache, bounds, report); !r) return r.error();
  }
  sort_report();
  return out;
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
}  // namespace runsnack::fs
