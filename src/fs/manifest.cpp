#include "fs/manifest.hpp"

#include "fs/path_rules.hpp"

#include <openssl/evp.h>

#include <string_view>
#include <unordered_set>

namespace runsnack::fs {

namespace {

// 2: file digests are content digests (content_digest.hpp); 1 was plain SHA-256.
constexpr std::uint8_t kMagic[4] = {'R', 'S', 'M', '2'};
constexpr std::uint8_t kExecBit = 0x80;

void put_u16(std::vector<std::uint8_t>& out, std::size_t v) {
  out.push_back(std::uint8_t(v >> 8));
  out.push_back(std::uint8_t(v));
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(std::uint8_t(v >> s));
}

void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int s = 56; s >= 0; s -= 8) out.push_back(std::uint8_t(v >> s));
}

// Bounds-checked big-endian reads over the untrusted wire form.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> b) : b_(b) {}
  bool take(std::size_t n, const std::uint8_t** p) {
    if (b_.size() - at_ < n) return false;
    *p = b_.data() + at_;
    at_ += n;
    return true;
  }
  bool u8(std::uint8_t* v) {
    const std::uint8_t* p;
    if (!take(1, &p)) return false;
    *v = *p;
    return true;
  }
  bool uint(std::size_t bytes, std::uint64_t* v) {
    const std::uint8_t* p;
    if (!take(bytes, &p)) return false;
    *v = 0;
    for (std::size_t i = 0; i < bytes; ++i) *v = (*v << 8) | p[i];
    return true;
  }
  bool text(std::string* s) {
    std::uint64_t n;
    const std::uint8_t* p;
    if (!uint(2, &n) || !take(n, &p)) return false;
    s->assign(reinterpret_cast<const char*>(p), n);
    return true;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  std::span<const std::uint8_t> b_;
  std::size_t at_ = 0;
};

}  // namespace

bool hex_to_bytes(std::string_view hex, std::uint8_t* out, std::size_t n) {
  if (hex.size() != 2 * n) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < n; ++i) {
    int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = std::uint8_t(hi << 4 | lo);
  }
  return true;
}

std::string bytes_to_hex(const std::uint8_t* data, std::size_t n) {
  static const char* hex = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) out[2 * i] = hex[data[i] >> 4], out[2 * i + 1] = hex[data[i] & 15];
  return out;
}

std::vector<std::uint8_t> encode_manifest(const std::vector<Entry>& entries) {
  std::vector<std::uint8_t> out;
  out.reserve(8 + entries.size() * 80);
  out.insert(out.end(), kMagic, kMagic + 4);
  put_u32(out, static_cast<std::uint32_t>(entries.size()));
  for (const auto& e : entries) {
    const std::uint8_t kind = e.type == EntryType::file ? (e.executable ? kExecBit : 0) : e.type == EntryType::dir ? 1 : 2;
    out.push_back(kind);
    put_u16(out, e.path.size());
    out.insert(out.end(), e.path.begin(), e.path.end());
    if (e.type == EntryType::file) {
      put_u64(out, e.size);
      std::uint8_t sha[32] = {};
      hex_to_bytes(e.sha256, sha, 32);
      out.insert(out.end(), sha, sha + 32);
    } else if (e.type == EntryType::link) {
      put_u16(out, e.target.size());
      out.insert(out.end(), e.target.begin(), e.target.end());
    }
  }
  return out;
}

Result<std::vector<Entry>> parse_manifest(std::span<const std::uint8_t> wire) {
  Reader in(wire);
  const std::uint8_t* magic;
  std::uint64_t count;
  if (!in.take(4, &magic) || !in.uint(4, &count)) return fail(errc::malformed, "manifest: bad header");
  if (std::equal(magic, magic + 3, kMagic) && magic[3] < kMagic[3])
    return fail(errc::unsupported, "the other side runs an older RunSnack (manifest version " +
                                       std::string(1, static_cast<char>(magic[3])) + "): update both sides");
  if (!std::equal(magic, magic + 4, kMagic)) return fail(errc::malformed, "manifest: bad header");
  if (count > kMaxManifestEntries) return fail(errc::too_large, "manifest: too many entries");
  // Each entry takes at least 3 bytes: a count beyond that is a lie, not a reason to reserve memory.
  if (count > wire.size() / 3) return fail(errc::malformed, "manifest: truncated");
  std::vector<Entry> out;
  out.reserve(count);
  std::unordered_set<std::string_view> seen;
  seen.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    Entry e;
    std::uint8_t kind;
    if (!in.u8(&kind) || !in.text(&e.path)) return fail(errc::malformed, "manifest: truncated");
    if (auto parts = split_relative_path(e.path); !parts) return parts.error();
    if ((kind & ~kExecBit) == 0) {
      e.type = EntryType::file;
      e.executable = (kind & kExecBit) != 0;
      const std::uint8_t* sha;
      if (!in.uint(8, &e.size) || !in.take(32, &sha)) return fail(errc::malformed, "manifest: truncated");
      if (e.size > kMaxFileBytes) return fail(errc::too_large, "manifest: file too large " + e.path);
      e.sha256 = bytes_to_hex(sha, 32);
    } else if (kind == 1) {
      e.type = EntryType::dir;
    } else if (kind == 2) {
      e.type = EntryType::link;
      if (!in.text(&e.target)) return fail(errc::malformed, "manifest: truncated");
      if (e.target.empty() || e.target.size() > kMaxPathBytes || e.target.find('\0') != std::string::npos)
        return fail(errc::invalid_argument, "manifest: bad symlink target for " + e.path);
    } else {
      return fail(errc::malformed, "manifest: unknown entry type");
    }
    out.push_back(std::move(e));
  }
  if (!in.done()) return fail(errc::malformed, "manifest: trailing bytes");
  // Views into `out`, which no longer grows.
  for (const auto& e : out)
    if (!seen.insert(e.path).second) return fail(errc::malformed, "manifest: duplicate path " + e.path);
  return out;
}

std::string manifest_digest(std::span<const std::uint8_t> wire) {
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(wire.data(), wire.size(), md, &len, EVP_sha256(), nullptr);
  return bytes_to_hex(md, len);
}

std::vector<std::string> files_to_fetch(const std::vector<Entry>& wanted, const std::map<std::string, Entry>& have) {
  std::vector<std::string> need;
  for (const auto& e : wanted) {
    if (e.type != EntryType::file) continue;
    auto it = have.find(e.path);
    if (it == have.end() || it->second.type != EntryType::file || it->second.sha256 != e.sha256) need.push_back(e.path);
  }
  return need;
}

std::uint64_t total_file_bytes(const std::vector<Entry>& entries) {
  std::uint64_t n = 0;
  for (const auto& e : entries)
    if (e.type == EntryType::file) n += e.size;
  return n;
}

std::optional<std::string> first_unasked(const std::vector<Entry>& entries, const std::vector<std::string>& asked) {
  std::unordered_set<std::string_view> wanted, above;
  for (const auto& a : asked) {
    wanted.insert(a);
    for (std::size_t at = a.find('/'); at != std::string::npos; at = a.find('/', at + 1))
      above.insert(std::string_view(a).substr(0, at));
  }
  for (const auto& e : entries) {
    const std::string_view path = e.path;
    bool ok = wanted.count(path) || (e.type == EntryType::dir && above.count(path));
    for (std::size_t at = path.find('/'); !ok && at != std::string_view::npos; at = path.find('/', at + 1))
      ok = wanted.count(path.substr(0, at)) > 0;
    if (!ok) return e.path;
  }
  return std::nullopt;
}

}  // namespace runsnack::fs
