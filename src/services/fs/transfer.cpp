#include "services/fs/transfer.hpp"

#include "core/json_fields.hpp"
#include "services/fs/path_rules.hpp"
#include "services/fs/receive_writer.hpp"

#include <boost/asio/this_coro.hpp>
#include <openssl/evp.h>
#include <unistd.h>

#include <cctype>
#include <ctime>
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
  // Allocated as the bytes arrive: a control or manifest frame may announce 32 MiB (net/mux_stream.hpp).
  const bool big = h->type == FrameType::control || h->type == FrameType::manifest;
  if (auto r = co_await stream.read_growing(h->length, f.payload, big ? 64 * 1024 : kMaxDataBytes); !r)
    co_return r.error();
  co_return f;
}

asio::awaitable<Result<nlohmann::json>> read_control(MuxStream& stream) {
  auto f = co_await read_frame(stream);
  if (!f) co_return f.error();
  if (f->type != FrameType::control) co_return fail(errc::malformed, "expected a control frame");
  auto j = decode_control(f->payload);
  if (!j) co_return j.error();
  if ((*j)["type"] == "error") {
    const std::string msg = string_or(*j, "message", "the other side failed");
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
  explicit FrameBatch(MuxStream& stream) : stream_(stream) { buf_.reserve(kFlushBytes + 2 * kMaxDataBytes); }
  void add(FrameType type, std::span<const std::uint8_t> payload) {
    const std::size_t at = buf_.size();
    buf_.resize(at + kFrameHeaderBytes + payload.size());
    put_header(at, type, payload.size());
    std::memcpy(buf_.data() + at + kFrameHeaderBytes, payload.data(), payload.size());
  }
  void add_control(const nlohmann::json& body) {
    const std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    add(FrameType::control, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  }
  // Room for a frame's payload of up to `max` bytes, read into in place (no copy into the batch);
  // then close_frame() keeps it or cancel_frame() drops it. Valid until the next call.
  std::span<std::uint8_t> open_frame(std::size_t max) {
    open_at_ = buf_.size();
    buf_.resize(open_at_ + kFrameHeaderBytes + max);
    return {buf_.data() + open_at_ + kFrameHeaderBytes, max};
  }
  void close_frame(FrameType type, std::size_t n) {
    put_header(open_at_, type, n);
    buf_.resize(open_at_ + kFrameHeaderBytes + n);
  }
  void cancel_frame() { buf_.resize(open_at_); }
  bool full() const { return buf_.size() >= kFlushBytes; }
  asio::awaitable<Result<void>> flush() {
    if (buf_.empty()) co_return Result<void>{};
    const asio::const_buffer out = asio::buffer(buf_);
    const double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    auto r = co_await stream_.write(out);
    const double wall1 = seconds(CLOCK_MONOTONIC), cpu1 = seconds(CLOCK_THREAD_CPUTIME_ID);
    if (last_flush_ > 0) gate_.record(std::max(0.0, (wall1 - wall0) - (cpu1 - cpu0)), wall1 - last_flush_);
    last_flush_ = wall1;
    buf_.clear();
    co_return r;
  }
  bool compress() const { return gate_.on(); }

 private:
  // Whether zstd is worth its CPU time. It is when the sender would otherwise wait for the link
  // (a slow network, or a receiver that is behind), not when the sender is the bottleneck itself
  // (loopback, a fast LAN: compressing there only slows the transfer). Judged by the share of
  // wall time the sending thread spent idle in writes over recent batches, with hysteresis.
  class CompressionGate {
   public:
    bool on() const { return on_; }
    void record(double idle_s, double wall_s) {
      if (wall_s <= 0) return;
      idle_share_ = 0.7 * idle_share_ + 0.3 * std::min(1.0, idle_s / wall_s);
      if (on_ && idle_share_ < 0.10) on_ = false;
      else if (!on_ && idle_share_ > 0.25) on_ = true;
    }

   private:
    bool on_ = true;  // until measured: right for the slow links where it matters most
    double idle_share_ = 0.5;
  };
  static double seconds(clockid_t clock) {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  }

  void put_header(std::size_t at, FrameType type, std::size_t n) {
    std::uint8_t* h = buf_.data() + at;
    h[0] = static_cast<std::uint8_t>(type);
    h[1] = std::uint8_t(n >> 24), h[2] = std::uint8_t(n >> 16), h[3] = std::uint8_t(n >> 8), h[4] = std::uint8_t(n);
  }
  // Grows without zeroing: every byte is written before it is sent.
  struct NoInit {
    using value_type = std::uint8_t;
    template <class U>
    struct rebind {
      using other = NoInit;
    };
    std::uint8_t* allocate(std::size_t n) { return std::allocator<std::uint8_t>{}.allocate(n); }
    void deallocate(std::uint8_t* p, std::size_t n) { std::allocator<std::uint8_t>{}.deallocate(p, n); }
    template <class... Args>
    void construct(std::uint8_t* p, Args&&... args) {
      if constexpr (sizeof...(Args) == 0) ::new (static_cast<void*>(p)) std::uint8_t;  // default-init: no zeroing
      else ::new (static_cast<void*>(p)) std::uint8_t(std::forward<Args>(args)...);
    }
    bool operator==(const NoInit&) const = default;
  };

  MuxStream& stream_;
  std::vector<std::uint8_t, NoInit> buf_;
  std::size_t open_at_ = 0;
  CompressionGate gate_;
  double last_flush_ = 0;
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
constexpr std::uint64_t kChunkedMinBytes = 1024 * 1024;
constexpr std::size_t kMaxBaseChunks = 65536;         // per file (16 GiB of it)
constexpr std::size_t kMaxBaseChunksTotal = 262144;   // per need message (~17 MB of JSON)

bool is_hex64(const std::string& s) {
  std::uint8_t raw[32];
  return hex_to_bytes(s, raw, 32);
}

// Whether what was just read of `entry` is its manifest content: a vouched file must still have the
// stamp it had when opened (any write since changes its ctime), any other its SHA-256.
bool content_matches(int fd, const struct stat& opened, bool vouched, EVP_MD_CTX* md, std::uint64_t read_bytes,
                     const Entry& entry) {
  if (read_bytes != entry.size) return false;
  if (vouched) {
    struct stat now{};
    return ::fstat(fd, &now) == 0 && stamp_of(now) == stamp_of(opened);
  }
  unsigned char digest[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(md, digest, &len);
  return bytes_to_hex(digest, len) == entry.sha256;
}

}  // namespace

asio::awaitable<Result<TransferStats>> send_tree(MuxStream& stream, int root, const std::vector<Entry>& entries,
                                                 Progress progress, std::optional<TopRename> rename,
                                                 const HashCache* hashed) {
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
  std::unordered_map<std::string_view, const Entry*> files;
  files.reserve(entries.size());
  for (const auto& e : entries)
    if (e.type == EntryType::file) files[e.path] = &e;
  std::uint64_t total = 0;
  for (const auto& p : (*need)["paths"]) {
    auto it = p.is_string() ? files.find(p.get_ref<const std::string&>()) : files.end();
    if (it == files.end()) co_return fail(errc::malformed, "asked for an unknown file");
    total += it->second->size;
  }
  if (hashed) hashed->index();
  std::unordered_map<std::string, std::vector<std::string>> bases;
  if (need->contains("bases")) {
    const auto& b = (*need)["bases"];
    if (!b.is_object()) co_return fail(errc::malformed, "bad chunk list");
    std::size_t count = 0;
    for (const auto& [path, list] : b.items()) {
      if (!files.count(path) || !list.is_array() || list.size() > kMaxBaseChunks ||
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
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  for (const auto& p : (*need)["paths"]) {
    const std::string path = p.get<std::string>();
    const Entry& entry = *files.at(path);
    const std::string source = rename ? rename->source_of(path) : path;
    auto file = open_regular_file(root, source);
    if (!file) co_return file.error();
    struct stat opened{};
    if (::fstat(file->get(), &opened) != 0) co_return fail(errc::io_error, path + ": " + std::strerror(errno));
    // Vouched for by the scan: its stamp after reading tells whether it changed. Else hash it now.
    const bool vouched = hashed && hashed->vouches(source, stamp_of(opened), entry.sha256);
    if (!vouched) EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
    std::uint64_t read_bytes = 0;
    const nlohmann::json begin = {{"type", "file"}, {"path", path}};
    batch.add_control(begin);
    const auto base_it = bases.find(path);
    const std::vector<std::string>* base = base_it == bases.end() ? nullptr : &base_it->second;
    // zstd only when it helps: not for compressed formats, and not for the
    // rest of a file whose first block did not shrink.
    bool try_zstd = !compressed_format(path);
    std::uint64_t same = 0;  // chunks equal to the receiver's, not announced yet
    for (std::size_t index = 0;; ++index) {
      // A chunk the receiver may hold already is read aside and compared; any other is read
      // straight into the batch as a data frame (dropped again if it travels compressed).
      const bool maybe_same = base && index < base->size();
      if (!maybe_same && same > 0) {  // past the receiver's copy: announce the run before the frame
        const nlohmann::json run = {{"type", "same"}, {"chunks", same}};
        batch.add_control(run);
        same = 0;
      }
      const std::span<std::uint8_t> room = maybe_same ? std::span<std::uint8_t>(buf) : batch.open_frame(kChunkBytes);
      auto n = read_full(file->get(), room, 0, false);
      if (!n) co_return Error(n.error().code, path + ": " + n.error().what());
      const std::span<const std::uint8_t> chunk(room.data(), *n);
      read_bytes += *n;
      if (!vouched) EVP_DigestUpdate(md.get(), chunk.data(), chunk.size());
      if (maybe_same && *n > 0 && sha256_hex(chunk.data(), chunk.size()) == (*base)[index]) {
        ++same;
        stats.reused_bytes += *n;
        continue;
      }
      std::optional<std::vector<std::uint8_t>> z;
      if (*n > 0 && try_zstd && batch.compress() && chunk.size() >= 512) {
        z = maybe_compress(chunk);
        if (!z) try_zstd = false;
      }
      if (!maybe_same && (*n == 0 || z)) batch.cancel_frame();
      if (*n == 0) break;
      if (same > 0) {  // announced before this chunk's frame (its bytes are still only in `buf`)
        const nlohmann::json run = {{"type", "same"}, {"chunks", same}};
        batch.add_control(run);
        same = 0;
      }
      if (z) batch.add(FrameType::zdata, *z);
      else if (maybe_same) batch.add(FrameType::data, chunk);
      else batch.close_frame(FrameType::data, *n);
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
    if (!content_matches(file->get(), opened, vouched, md.get(), read_bytes, entry)) {
      // The receiver drops this file and answers with an error; ours says what happened.
      const Error changed(errc::io_error, path + " changed while it was being sent; run again to send its new content");
      const nlohmann::json msg = {{"type", "error"}, {"message", changed.what()}};
      batch.add_control(msg);
      (void)co_await batch.flush();
      co_return changed;
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

// The ignore rules the sender scanned with, from the copies of its rule files the sync just wrote.
IgnoreRules synced_ignore_rules(int root) {
  IgnoreRules rules;
  for (const char* name : kIgnoreRuleFiles) {
    auto file = open_regular_file(root, name);
    if (!file) continue;
    std::string text(64 * 1024, '\0');  // rule files beyond this are not worth a sync's time
    auto n = read_full(file->get(), std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(text.data()), text.size()), 0, true);
    if (!n) continue;
    text.resize(*n);
    rules.add_file_text(text);
  }
  return rules;
}

// Whether `entry` or a folder above it is ignored (the sender's scan never walks an ignored folder).
bool ignored_here_or_above(const IgnoreRules& rules, const Entry& entry) {
  for (std::size_t slash = entry.path.find('/'); slash != std::string::npos; slash = entry.path.find('/', slash + 1))
    if (rules.ignored(std::string_view(entry.path).substr(0, slash), true)) return true;
  return rules.ignored(entry.path, entry.type == EntryType::dir);
}

// Reads one file's frames (after its "file" control) up to its file_end and queues them for the
// writer. *stream_broke tells a failed read from a frame that breaks the protocol.
asio::awaitable<Result<void>> receive_file_pieces(MuxStream& stream, ReceiveWriter& writer, bool* stream_broke) {
  for (;;) {
    std::array<std::uint8_t, kFrameHeaderBytes> head{};
    if (auto r = co_await stream.read_exact(asio::buffer(head)); !r) {
      *stream_broke = true;
      co_return r.error();
    }
    auto h = decode_frame_header(head);
    if (!h) co_return h.error();
    const bool file_bytes = h->type == FrameType::data || h->type == FrameType::zdata;
    const bool pooled = file_bytes && h->length <= kMaxDataBytes;
    // File bytes: a pooled buffer, not zeroed. Control frames: allocated as they arrive (one may announce 32 MiB).
    std::unique_ptr<std::uint8_t[]> bytes;
    std::vector<std::uint8_t> text;
    Result<void> r = Result<void>{};
    if (pooled) {
      bytes = writer.buffer();
      r = co_await stream.read_exact(asio::buffer(bytes.get(), h->length));
    } else {
      r = co_await stream.read_growing(h->length, text);
    }
    if (!r) {
      *stream_broke = true;
      co_return r.error();
    }
    if (file_bytes) {
      writer.data(std::move(bytes), h->length, h->type == FrameType::zdata, pooled);
      co_await writer.wait_for_room();
      if (writer.failed()) co_return Result<void>{};  // the caller reports the writer's error
      continue;
    }
    if (h->type != FrameType::control) co_return fail(errc::malformed, "unexpected frame in a file");
    auto j = decode_control(text);
    if (!j) co_return j.error();
    if ((*j)["type"] == "error") {
      const std::string msg = string_or(*j, "message", "the other side failed");
      co_return fail(errc::refused, msg);
    }
    if ((*j)["type"] == "same" && (*j)["chunks"].is_number_unsigned()) {
      writer.same((*j)["chunks"].get<std::uint64_t>());
      continue;
    }
    if ((*j)["type"] != "file_end") co_return fail(errc::malformed, "expected file_end");
    writer.end();
    co_return Result<void>{};
  }
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
  // Files are written on the writer's thread while this one reads the next frames.
  std::uint64_t announced = 0;  // bytes of the files received completely, for progress
  ReceiveWriter writer(co_await asio::this_coro::executor, root, cache);
  for (const auto& path : need) {
    const Entry& entry = *wanted[path];
    auto begin = co_await read_control(stream);
    if (!begin) {
      co_await writer.finish();
      co_return begin.error();
    }
    if ((*begin)["type"] != "file" || (*begin)["path"] != path) {
      co_await writer.finish();  // the files that arrived whole are kept
      co_return fail(errc::malformed, "expected file " + path);
    }
    const auto base_it = bases.find(path);
    std::optional<Base> base;
    if (base_it != bases.end()) {
      base = std::move(base_it->second);
      bases.erase(base_it);
    }
    writer.begin(entry, std::move(base));
    bool stream_broke = false;
    Result<void> r = co_await receive_file_pieces(stream, writer, &stream_broke);
    if (r) {
      if (auto e = writer.failed()) r = *e;
    }
    if (!r) {
      if (stream_broke) writer.abort();  // keep what arrived of this file for a resume
      co_await writer.finish();          // the files that arrived whole are kept
      if (!stream_broke) co_await send_error(stream, r.error());
      co_return r.error();
    }
    announced += entry.size;
    if (progress) progress(announced, total);
  }
  auto written = co_await writer.finish();
  if (!written) {
    co_await send_error(stream, written.error());
    co_return written.error();
  }
  stats.bytes = written->bytes;
  stats.reused_bytes = written->reused_bytes;
  stats.files_sent = written->files;
  if (state) {
    // Deepest first (a manifest lists a folder before its contents), so emptied folders go too.
    // What the sender now ignores stays, as rsync's --delete leaves excluded files.
    const IgnoreRules ignored = synced_ignore_rules(root);
    for (auto it = state->entries.rbegin(); it != state->entries.rend(); ++it)
      if (!wanted.count(it->path) && !ignored_here_or_above(ignored, *it) && remove_synced(cursor, *it, state->hashes))
        ++stats.deleted;
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
