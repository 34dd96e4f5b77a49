#include "services/fs/transfer.hpp"

#include "services/fs/path_rules.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <cerrno>
#include <fstream>
#include <memory>
#include <string_view>
#include <unordered_map>

namespace runsnack::fs {

namespace asio = boost::asio;

asio::awaitable<Result<Frame>> read_frame(MuxStream& stream) {
  std::array<std::uint8_t, kFrameHeaderBytes> head{};
  if (auto r = co_await stream.read_exact(asio::buffer(head)); !r) co_return r.error();
  auto h = decode_frame_header(head);
  if (!h) co_return h.error();
  Frame f;
  f.type = h->type;
  f.payload.resize(h->length);
  if (h->length > 0) {
    if (auto r = co_await stream.read_exact(asio::buffer(f.payload)); !r) co_return r.error();
  }
  co_return f;
}

asio::awaitable<Result<nlohmann::json>> read_control(MuxStream& stream) {
  auto f = co_await read_frame(stream);
  if (!f) co_return f.error();
  if (f->type != FrameType::control) co_return fail(errc::malformed, "expected a control frame");
  auto j = decode_control(f->payload);
  if (!j) co_return j.error();
  if ((*j)["type"] == "error") {
    const std::string msg = j->value("message", std::string("the other side failed"));
    co_return fail(errc::refused, msg);
  }
  co_return j;
}

asio::awaitable<Result<void>> write_frame(MuxStream& stream, FrameType type, std::span<const std::uint8_t> payload) {
  const std::vector<std::uint8_t> bytes = encode_frame(type, payload);
  co_return co_await stream.write(asio::buffer(bytes));
}

asio::awaitable<Result<void>> write_control(MuxStream& stream, const nlohmann::json& body) {
  const std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  co_return co_await write_frame(stream, FrameType::control, bytes);
}

namespace {

asio::awaitable<void> send_error(MuxStream& stream, const Error& e) {
  const nlohmann::json msg = {{"type", "error"}, {"message", e.what()}};
  (void)co_await write_control(stream, msg);
}

}  // namespace

std::string TopRename::source_of(const std::string& p) const {
  if (p == wire_top) return source_top;
  if (p.starts_with(wire_top + "/")) return source_top + p.substr(wire_top.size());
  return p;
}

namespace {

// Frames queued for one stream write: a write waits until its bytes reach the
// transport, so one write per frame would cost a wait per frame (several per
// file). Small files travel many to a write; big ones fill a write each.
class FrameBatch {
 public:
  static constexpr std::size_t kFlushBytes = 1024 * 1024;
  explicit FrameBatch(MuxStream& stream) : stream_(stream) { buf_.reserve(kFlushBytes + kMaxDataBytes + 1024); }
  void add(FrameType type, std::span<const std::uint8_t> payload) {
    const auto n = static_cast<std::uint32_t>(payload.size());
    const std::uint8_t head[kFrameHeaderBytes] = {static_cast<std::uint8_t>(type), std::uint8_t(n >> 24),
                                                  std::uint8_t(n >> 16), std::uint8_t(n >> 8), std::uint8_t(n)};
    buf_.insert(buf_.end(), head, head + kFrameHeaderBytes);
    buf_.insert(buf_.end(), payload.begin(), payload.end());
  }
  void add_control(const nlohmann::json& body) {
    const std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    add(FrameType::control, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  }
  bool full() const { return buf_.size() >= kFlushBytes; }
  asio::awaitable<Result<void>> flush() {
    if (buf_.empty()) co_return Result<void>{};
    const asio::const_buffer out = asio::buffer(buf_);
    auto r = co_await stream_.write(out);
    buf_.clear();
    co_return r;
  }

 private:
  MuxStream& stream_;
  std::vector<std::uint8_t> buf_;
};

// Formats that are compressed already: zstd would spend time to save nothing.
bool compressed_format(const std::string& path) {
  static const char* const kExt[] = {".gz", ".tgz", ".bz2", ".xz", ".zst", ".zip", ".7z", ".lz4", ".br",
                                     ".jar", ".whl", ".npz", ".png", ".jpg", ".jpeg", ".gif", ".webp",
                                     ".mp3", ".mp4", ".mkv", ".webm", ".avif", ".heic", ".pdf"};
  const auto dot = path.rfind('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return false;
  std::string ext = path.substr(dot);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* e : kExt)
    if (ext == e) return true;
  return false;
}

// Chunk-level reuse: a needed file of at least kChunkedMinBytes that the receiver holds an older
// copy of (or the prefix of an interrupted transfer) travels as "same" runs for the fixed-size
// chunks whose SHA-256 the receiver offered, and as data for the rest.
constexpr std::uint64_t kChunkBytes = kMaxDataBytes;
constexpr std::uint64_t kChunkedMinBytes = 1024 * 1024;
constexpr std::size_t kMaxBaseChunks = 65536;         // per file (16 GiB of it)
constexpr std::size_t kMaxBaseChunksTotal = 262144;   // per need message (~17 MB of JSON)

bool is_hex64(const std::string& s) {
  std::uint8_t raw[32];
  return hex_to_bytes(s, raw, 32);
}

// Reads until `buf` is full or the file ends: chunk boundaries must not depend on short reads.
Result<std::size_t> read_full(int fd, std::span<std::uint8_t> buf, std::uint64_t offset, bool positional) {
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = positional ? ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(offset + got))
                           : ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errc::io_error, std::string("read: ") + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

}  // namespace

asio::awaitable<Result<TransferStats>> send_tree(MuxStream& stream, int root, const std::vector<Entry>& entries,
                                                 Progress progress, std::optional<TopRename> rename) {
  TransferStats stats;
  stats.entries = entries.size();
  const std::vector<std::uint8_t> wire = encode_manifest(entries);
  const nlohmann::json offer = {{"type", "offer"}, {"digest", manifest_digest(wire)}, {"entries", entries.size()}};
  if (auto r = co_await write_control(stream, offer); !r) co_return r.error();
  auto answer = co_await read_control(stream);
  if (!answer) co_return answer.error();
  if ((*answer)["type"] == "synced") {
    stats.unchanged = true;
    co_return stats;
  }
  if ((*answer)["type"] != "send_manifest") co_return fail(errc::malformed, "expected synced or send_manifest");
  if (auto r = co_await write_frame(stream, FrameType::manifest, wire); !r) co_return r.error();
  auto need = co_await read_control(stream);
  if (!need) co_return need.error();
  if ((*need)["type"] != "need" || !(*need)["paths"].is_array()) co_return fail(errc::malformed, "expected need");
  std::unordered_map<std::string_view, std::uint64_t> sizes;
  sizes.reserve(entries.size());
  for (const auto& e : entries)
    if (e.type == EntryType::file) sizes[e.path] = e.size;
  std::uint64_t total = 0;
  for (const auto& p : (*need)["paths"]) {
    auto it = p.is_string() ? sizes.find(p.get_ref<const std::string&>()) : sizes.end();
    if (it == sizes.end()) co_return fail(errc::malformed, "asked for an unknown file");
    total += it->second;
  }
  std::unordered_map<std::string, std::vector<std::string>> bases;
  if (need->contains("bases")) {
    const auto& b = (*need)["bases"];
    if (!b.is_object()) co_return fail(errc::malformed, "bad chunk list");
    std::size_t count = 0;
    for (const auto& [path, list] : b.items()) {
      if (!sizes.count(path) || !list.is_array() || list.size() > kMaxBaseChunks ||
          (count += list.size()) > kMaxBaseChunksTotal)
        co_return fail(errc::malformed, "bad chunk list");
      std::vector<std::string> hashes;
      for (const auto& h : list) {
        if (!h.is_string() || !is_hex64(h.get_ref<const std::string&>())) co_return fail(errc::malformed, "bad chunk hash");
        hashes.push_back(h.get<std::string>());
      }
      bases[path] = std::move(hashes);
    }
  }
  // Every needed file goes back to back, no round trip per file; the receiver
  // answers once at the end (or with an error, which the next read sees).
  FrameBatch batch(stream);
  std::vector<std::uint8_t> buf(kChunkBytes);
  const nlohmann::json end = {{"type", "file_end"}};
  for (const auto& p : (*need)["paths"]) {
    const std::string path = p.get<std::string>();
    auto file = open_regular_file(root, rename ? rename->source_of(path) : path);
    if (!file) co_return file.error();
    const nlohmann::json begin = {{"type", "file"}, {"path", path}};
    batch.add_control(begin);
    const auto base_it = bases.find(path);
    const std::vector<std::string>* base = base_it == bases.end() ? nullptr : &base_it->second;
    // zstd only when it helps: not for compressed formats, and not for the
    // rest of a file whose first block did not shrink.
    bool try_zstd = !compressed_format(path);
    std::uint64_t same = 0;  // chunks equal to the receiver's, not announced yet
    for (std::size_t index = 0;; ++index) {
      auto n = read_full(file->get(), buf, 0, false);
      if (!n) co_return Error(n.error().code, path + ": " + n.error().what());
      if (*n == 0) break;
      std::span<const std::uint8_t> chunk(buf.data(), *n);
      if (base && index < base->size() && sha256_hex(chunk.data(), chunk.size()) == (*base)[index]) {
        ++same;
        stats.reused_bytes += *n;
        continue;
      }
      if (same > 0) {
        const nlohmann::json run = {{"type", "same"}, {"chunks", same}};
        batch.add_control(run);
        same = 0;
      }
      std::optional<std::vector<std::uint8_t>> z;
      if (try_zstd && chunk.size() >= 512) {
        z = maybe_compress(chunk);
        if (!z) try_zstd = false;
      }
      if (z) batch.add(FrameType::zdata, *z);
      else batch.add(FrameType::data, chunk);
      stats.bytes += *n;
      stats.wire_bytes += z ? z->size() : chunk.size();
      if (batch.full()) {
        if (auto r = co_await batch.flush(); !r) co_return r.error();
        if (progress) progress(stats.bytes + stats.reused_bytes, total);
      }
    }
    if (same > 0) {
      const nlohmann::json run = {{"type", "same"}, {"chunks", same}};
      batch.add_control(run);
    }
    batch.add_control(end);
    ++stats.files_sent;
    if (batch.full()) {
      if (auto r = co_await batch.flush(); !r) co_return r.error();
      if (progress) progress(stats.bytes + stats.reused_bytes, total);
    }
  }
  if (auto r = co_await batch.flush(); !r) co_return r.error();
  if (progress && total > 0) progress(stats.bytes + stats.reused_bytes, total);
  auto done = co_await read_control(stream);
  if (!done) co_return done.error();
  if ((*done)["type"] != "synced") co_return fail(errc::malformed, "expected synced");
  if ((*done)["deleted"].is_number_unsigned()) stats.deleted = (*done)["deleted"].get<std::size_t>();
  co_return stats;
}

namespace {

std::string quota_text(std::uint64_t n) { return std::to_string(n) + " bytes"; }

Result<void> check_quota(const std::vector<Entry>& entries, const ReceiveLimits& limits) {
  if (!limits.quota_bytes) return {};
  for (const auto& e : entries)
    if (e.type == EntryType::file && e.size > *limits.quota_bytes)
      return fail(errc::too_large, "file '" + e.path + "' (" + quota_text(e.size) +
                                       ") is bigger than the workspace disk quota (" + quota_text(*limits.quota_bytes) + ")");
  if (total_file_bytes(entries) > *limits.quota_bytes)
    return fail(errc::too_large, "the files to sync (" + quota_text(total_file_bytes(entries)) +
                                     ") exceed the workspace disk quota (" + quota_text(*limits.quota_bytes) + ")");
  return {};
}

// A receiver's older copy of a file, or the prefix an interrupted transfer kept (resume_name):
// the chunks the sender may refer to with "same".
struct Base {
  UniqueFd fd;
  std::uint64_t size = 0;
  std::size_t chunks = 0;  // offered to the sender
  bool resume = false;     // an interrupted transfer's prefix: removed once the file is in place
};

std::optional<Base> open_base(DirCursor& cursor, const std::string& path) {
  std::string leaf;
  auto dir = cursor.parent_of(path, false, &leaf);
  if (!dir) return std::nullopt;
  for (bool resume : {true, false}) {
    const std::string name = resume ? resume_name(leaf) : leaf;
    int fd = ::openat(*dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    UniqueFd guard(fd);
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) < kChunkBytes) continue;
    Base b;
    b.fd = std::move(guard);
    b.size = static_cast<std::uint64_t>(st.st_size);
    b.resume = resume;
    return b;
  }
  return std::nullopt;
}

Result<std::vector<std::string>> chunk_hashes(int fd, std::uint64_t size, std::size_t max_chunks) {
  std::vector<std::string> out;
  std::vector<std::uint8_t> buf(kChunkBytes);
  for (std::uint64_t off = 0; off < size && out.size() < max_chunks; off += kChunkBytes) {
    auto n = read_full(fd, buf, off, true);
    if (!n) return n.error();
    if (*n == 0) break;
    out.push_back(sha256_hex(buf.data(), *n));
  }
  return out;
}

// Receives one announced file into place; checks size and hash. A transfer cut off
// mid-file keeps its prefix (resume_name) for the next one.
asio::awaitable<Result<std::uint64_t>> receive_file(MuxStream& stream, DirCursor& cursor, const Entry& entry,
                                                    HashCache* cache, Base* base, std::uint64_t* reused) {
  auto out = AtomicFile::create(cursor, entry.path);
  if (!out) co_return out.error();
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
  std::uint64_t got = 0;
  std::vector<std::uint8_t> copy;
  for (;;) {
    auto f = co_await read_frame(stream);
    if (!f) {
      if (out->written() >= kChunkBytes) out->keep_partial();
      co_return f.error();
    }
    if (f->type == FrameType::control) {
      auto j = decode_control(f->payload);
      if (j && (*j)["type"] == "same" && (*j)["chunks"].is_number_unsigned()) {
        // The sender says the next chunks equal ours: copy them from the base (never from its side).
        std::uint64_t count = (*j)["chunks"].get<std::uint64_t>();
        if (!base || got % kChunkBytes != 0 || count > base->chunks || got / kChunkBytes + count > base->chunks)
          co_return fail(errc::malformed, entry.path + ": refers to chunks it was not offered");
        copy.resize(kChunkBytes);
        for (std::uint64_t i = 0; i < count; ++i) {
          const std::uint64_t off = got;
          const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(kChunkBytes, base->size - off));
          auto n = read_full(base->fd.get(), std::span<std::uint8_t>(copy.data(), len), off, true);
          if (!n || *n != len) co_return fail(errc::io_error, entry.path + ": the older copy changed while in use");
          got += len;
          if (got > entry.size) co_return fail(errc::too_large, entry.path + ": more bytes than announced");
          EVP_DigestUpdate(md.get(), copy.data(), len);
          if (auto r = out->write(copy.data(), len); !r) co_return r.error();
          *reused += len;
        }
        continue;
      }
      if (!j || (*j)["type"] != "file_end") co_return fail(errc::malformed, "expected file_end");
      break;
    }
    std::vector<std::uint8_t> plain;
    if (f->type == FrameType::zdata) {
      auto d = decompress(f->payload);
      if (!d) co_return d.error();
      plain = std::move(*d);
    } else if (f->type == FrameType::data) {
      plain = std::move(f->payload);
    } else {
      co_return fail(errc::malformed, "unexpected frame in a file");
    }
    got += plain.size();
    if (got > entry.size) co_return fail(errc::too_large, entry.path + ": more bytes than announced");
    EVP_DigestUpdate(md.get(), plain.data(), plain.size());
    if (auto r = out->write(plain.data(), plain.size()); !r) co_return r.error();
  }
  unsigned char digest[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(md.get(), digest, &len);
  const std::string sha = bytes_to_hex(digest, len);
  if (got != entry.size || sha != entry.sha256)
    co_return fail(errc::malformed, entry.path + ": checksum mismatch (the file changed while it was sent?)");
  auto stamp = out->commit(entry.executable);
  if (!stamp) co_return stamp.error();
  if (base && base->resume) ::unlinkat(out->dir_fd(), resume_name(out->leaf()).c_str(), 0);
  if (cache) cache->put(entry.path, *stamp, sha, wall_clock_ns());
  co_return got;
}

}  // namespace

void SyncState::load(const std::filesystem::path& base) {
  digest.clear();
  entries.clear();
  std::filesystem::path file = base;
  file += ".manifest";
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 64) return;
  const std::span<const std::uint8_t> wire(reinterpret_cast<const std::uint8_t*>(bytes.data()) + 64, bytes.size() - 64);
  auto parsed = parse_manifest(wire);
  if (!parsed) return;
  entries = std::move(*parsed);
  digest = bytes.substr(0, 64);
  std::filesystem::path hashes_file = base;
  hashes_file += ".hashes";
  hashes.load(hashes_file);
}

void SyncState::save(const std::filesystem::path& base) {
  std::filesystem::path hashes_file = base;
  hashes_file += ".hashes";
  hashes.save(hashes_file);
  std::filesystem::path file = base, tmp = base;
  file += ".manifest";
  tmp += ".manifest.tmp";
  const std::vector<std::uint8_t> wire = encode_manifest(entries);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(digest.data(), static_cast<std::streamsize>(digest.size()));
    out.write(reinterpret_cast<const char*>(wire.data()), static_cast<std::streamsize>(wire.size()));
    if (!out) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
}

asio::awaitable<Result<TransferStats>> receive_tree(MuxStream& stream, int root, ReceiveLimits limits,
                                                    SyncState* state, Progress progress) {
  TransferStats stats;
  // Checked before the offer arrives: the sender opens the stream before it scans its tree.
  const bool kept = state && !state->digest.empty() && tree_unchanged(root, state->entries, state->hashes);
  auto offer = co_await read_control(stream);
  if (!offer) co_return offer.error();
  if ((*offer)["type"] != "offer" || !(*offer)["digest"].is_string()) co_return fail(errc::malformed, "expected an offer");
  if (kept && (*offer)["digest"] == state->digest) {
    stats.entries = state->entries.size();
    stats.unchanged = true;
    const nlohmann::json synced = {{"type", "synced"}, {"files", 0}, {"bytes", 0}, {"deleted", 0}};
    if (auto r = co_await write_control(stream, synced); !r) co_return r.error();
    co_return stats;
  }
  const nlohmann::json ask = {{"type", "send_manifest"}};
  if (auto r = co_await write_control(stream, ask); !r) co_return r.error();
  auto frame = co_await read_frame(stream);
  if (!frame) co_return frame.error();
  if (frame->type != FrameType::manifest) co_return fail(errc::malformed, "expected a manifest");
  auto entries = parse_manifest(frame->payload);
  Result<void> ok = entries ? check_quota(*entries, limits) : Result<void>(entries.error());
  if (!ok) {
    co_await send_error(stream, ok.error());
    co_return ok.error();
  }
  stats.entries = entries->size();
  HashCache* cache = state ? &state->hashes : nullptr;
  DirCursor cursor(root);
  std::map<std::string, Entry> have;
  std::unordered_map<std::string_view, const Entry*> wanted;
  wanted.reserve(entries->size());
  for (const auto& e : *entries) {
    wanted[e.path] = &e;
    auto now = stat_entry(cursor, e.path, e.type == EntryType::file ? cache : nullptr);
    Result<void> r;
    if (e.type == EntryType::dir && !(now && now->type == EntryType::dir)) r = make_dir(cursor, e.path);
    else if (e.type == EntryType::link && !(now && now->type == EntryType::link && now->target == e.target))
      r = make_symlink(cursor, e.path, e.target);
    else if (now) have[e.path] = *now;
    if (!r) {
      co_await send_error(stream, r.error());
      co_return r.error();
    }
  }
  auto need = files_to_fetch(*entries, have);
  std::uint64_t total = 0;
  for (const auto& p : need) total += wanted[p]->size;
  // Large needed files we hold a copy or a prefix of: offer their chunk hashes.
  std::unordered_map<std::string, Base> bases;
  nlohmann::json offered = nlohmann::json::object();
  std::size_t offered_chunks = 0;
  for (const auto& p : need) {
    if (wanted[p]->size < kChunkedMinBytes || offered_chunks >= kMaxBaseChunksTotal) continue;
    auto base = open_base(cursor, p);
    if (!base) continue;
    auto hashes = chunk_hashes(base->fd.get(), base->size, std::min(kMaxBaseChunks, kMaxBaseChunksTotal - offered_chunks));
    if (!hashes || hashes->empty()) continue;
    offered_chunks += hashes->size();
    base->chunks = hashes->size();
    offered[p] = std::move(*hashes);
    bases.emplace(p, std::move(*base));
  }
  nlohmann::json need_msg = {{"type", "need"}, {"paths", need}};
  if (!offered.empty()) need_msg["bases"] = std::move(offered);
  if (auto r = co_await write_control(stream, need_msg); !r) co_return r.error();
  for (const auto& path : need) {
    auto begin = co_await read_control(stream);
    if (!begin) co_return begin.error();
    if ((*begin)["type"] != "file" || (*begin)["path"] != path) co_return fail(errc::malformed, "expected file " + path);
    const auto base_it = bases.find(path);
    Base* base = base_it == bases.end() ? nullptr : &base_it->second;
    auto got = co_await receive_file(stream, cursor, *wanted[path], cache, base, &stats.reused_bytes);
    if (!got) {
      co_await send_error(stream, got.error());
      co_return got.error();
    }
    stats.bytes += *got;
    ++stats.files_sent;
    if (base) bases.erase(base_it);  // its descriptor is no longer needed
    if (progress) progress(stats.bytes, total);
  }
  if (state) {
    // Deepest first (a manifest lists a folder before its contents), so emptied folders go too.
    for (auto it = state->entries.rbegin(); it != state->entries.rend(); ++it)
      if (!wanted.count(it->path) && remove_synced(cursor, *it, state->hashes)) ++stats.deleted;
    state->digest = manifest_digest(frame->payload);
    state->entries = std::move(*entries);
    state->hashes.retain(state->entries);
    state->hashes.settle();
  }
  stats.bytes -= stats.reused_bytes;  // what travelled
  const nlohmann::json synced = {{"type", "synced"}, {"files", stats.files_sent}, {"bytes", stats.bytes},
                                 {"reused_bytes", stats.reused_bytes}, {"deleted", stats.deleted}};
  if (auto r = co_await write_control(stream, synced); !r) co_return r.error();
  co_return stats;
}

}  // namespace runsnack::fs
