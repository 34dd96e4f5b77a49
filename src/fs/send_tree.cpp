// The sending half of a tree transfer (transfer.hpp): the offer, the manifest,
// then every file the receiver needs, back to back. The files are read,
// hashed and compressed on the offload pool (offload.hpp), a batch of frames
// at a time; the io thread only writes the batches. Holes of sparse files are
// not read: a chunk that lies in one travels as a "hole" announcement.
#include "fs/transfer.hpp"

#include "fs/content_digest.hpp"
#include "fs/offload.hpp"
#include "fs/read_bounds.hpp"
#include "fs/receive_writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <string_view>
#include <unordered_map>

namespace runsnack::fs {

namespace asio = boost::asio;

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


bool is_hex64(const std::string& s) {
  std::uint8_t raw[32];
  return hex_to_bytes(s, raw, 32);
}

// Reads the needed files into a FrameBatch, one batch per fill() (on the offload pool), and
// answers for each file's content: a file the scan's cache vouches for must still have the
// stamp it had when opened (any write since changes its ctime), any other its content digest.
// It stops between chunks when `bounds` say so, and never reads more of a file than its entry's
// size and one chunk (a file that grows meanwhile has changed).
class FileSender {
 public:
  FileSender(int root, std::vector<const Entry*> files, std::unordered_map<std::string, std::vector<std::string>> bases,
             std::vector<PathRename> renames, const HashCache* hashed, std::optional<SendLimit> limit, ReadBounds bounds)
      : root_(root), files_(std::move(files)), bases_(std::move(bases)), renames_(std::move(renames)), hashed_(hashed),
        limit_(std::move(limit)), bounds_(std::move(bounds)), buf_(kChunkBytes) {}

  // Adds frames until the batch is full or every file is in it (then true). On an error that the
  // receiver should hear of, its error frame is in the batch already.
  Result<bool> fill(FrameBatch& batch, TransferStats& stats) {
    while (!batch.full()) {
      if (!file_) {
        if (next_ == files_.size()) return true;
        if (auto r = open(*files_[next_++], batch); !r) return r.error();
      }
      if (auto r = step(batch, stats); !r) return r.error();
    }
    return false;
  }

 private:
  Result<void> open(const Entry& entry, FrameBatch& batch) {
    entry_ = &entry;
    source_ = renames_.empty() ? entry.path : source_of(renames_, entry.path);
    auto file = open_regular_file(root_, source_);
    if (!file) return file.error();
    file_ = std::move(*file);
    if (::fstat(file_.get(), &opened_) != 0) return fail(errc::io_error, entry.path + ": " + std::strerror(errno));
    // Vouched for by the scan: its stamp after reading tells whether it changed. Else hash it now.
    vouched_ = hashed_ && hashed_->vouches(source_, stamp_of(opened_), entry.sha256);
    digest_.reset();
    if (!vouched_) digest_.emplace();
    size_ = static_cast<std::uint64_t>(opened_.st_size);
    sparse_ = static_cast<std::uint64_t>(opened_.st_blocks) * 512 < size_;
    run_ = sparse_ ? next_data(file_.get(), 0, size_) : DataRun{0, size_};
    index_ = 0;
    read_bytes_ = 0;
    pending_ = {};
    const auto base_it = bases_.find(entry.path);
    base_ = base_it == bases_.end() ? nullptr : &base_it->second;
    // zstd only when it helps: not for compressed formats, and not for the rest of a file whose
    // first block did not shrink.
    try_zstd_ = !compressed_format(entry.path);
    const nlohmann::json begin = {{"type", "file"}, {"path", entry.path}};
    batch.add_control(begin);
    if (sparse_ && bounds_.refuse_unseen_holes)  // made sparse since the scan hashed it
      if (auto r = check_unseen_holes(file_.get(), opened_); !r)
        return refuse(batch, Error(r.error().code, entry.path + ": " + r.error().what()));
    return {};
  }

  // Chunks equal to the receiver's ("same") or in a hole ("hole") are announced as runs, before
  // the next data frame and at the end of the file; a run of one kind ends where the other starts.
  void pend(const char* kind, FrameBatch& batch) {
    if (pending_.count > 0 && std::string_view(pending_.kind) != kind) announce(batch);
    pending_.kind = kind;
    ++pending_.count;
  }
  void announce(FrameBatch& batch) {
    if (pending_.count == 0) return;
    const nlohmann::json run = {{"type", pending_.kind}, {"chunks", pending_.count}};
    batch.add_control(run);
    pending_.count = 0;
  }

  // One chunk of the current file.
  Result<void> step(FrameBatch& batch, TransferStats& stats) {
    if (bounds_.stopped()) return refuse(batch, bounds_.stopped_error());
    const std::uint64_t off = index_ * kChunkBytes;
    if (sparse_ && off < size_) {
      if (off >= run_.end) run_ = next_data(file_.get(), off, size_);
      const std::uint64_t len = std::min<std::uint64_t>(kChunkBytes, size_ - off);
      if (off + len <= run_.begin) {  // all of it in a hole: zeros that are never read
        pend("hole", batch);
        if (digest_) digest_->zeros(len);
        read_bytes_ += len;
        ++index_;
        if (read_bytes_ > entry_->size) return refuse(batch, changed());
        return {};
      }
    }
    // A chunk the receiver may hold already is read aside and compared; any other is read
    // straight into the batch as a data frame (dropped again if it travels compressed).
    const bool maybe_same = base_ && index_ < base_->size();
    if (!maybe_same) announce(batch);  // before the frame is opened
    const std::span<std::uint8_t> room = maybe_same ? std::span<std::uint8_t>(buf_) : batch.open_frame(kChunkBytes);
    auto n = read_full(file_.get(), room, off, true);
    if (!n) {
      if (!maybe_same) batch.cancel_frame();
      return Error(n.error().code, entry_->path + ": " + n.error().what());
    }
    const std::span<const std::uint8_t> chunk(room.data(), *n);
    read_bytes_ += *n;
    if (read_bytes_ > entry_->size) {  // it grew: stop here rather than read what it grows to
      if (!maybe_same) batch.cancel_frame();
      return refuse(batch, changed());
    }
    if (digest_) digest_->update(chunk);
    if (maybe_same && *n > 0 && sha256_hex(chunk.data(), chunk.size()) == (*base_)[index_]) {
      pend("same", batch);
      stats.reused_bytes += *n;
      ++index_;
      return {};
    }
    std::optional<std::vector<std::uint8_t>> z;
    if (*n > 0 && try_zstd_ && batch.compress() && chunk.size() >= 512) {
      z = maybe_compress(chunk);
      if (!z) try_zstd_ = false;
    }
    if (!maybe_same && (*n == 0 || z)) batch.cancel_frame();
    if (*n == 0) return end_file(batch, stats);
    announce(batch);  // a run read aside (its bytes are still only in `buf_`)
    if (z) batch.add(FrameType::zdata, *z);
    else if (maybe_same) batch.add(FrameType::data, chunk);
    else batch.close_frame(FrameType::data, *n);
    stats.bytes += *n;
    stats.wire_bytes += z ? z->size() : chunk.size();
    ++index_;
    if (limit_ && stats.bytes > limit_->bytes) return refuse(batch, Error(errc::too_large, limit_->message));
    return {};
  }

  Result<void> end_file(FrameBatch& batch, TransferStats& stats) {
    announce(batch);
    bool same = read_bytes_ == entry_->size;
    if (same && vouched_) {
      struct stat now{};
      same = ::fstat(file_.get(), &now) == 0 && stamp_of(now) == stamp_of(opened_);
    } else if (same) {
      same = digest_->finish() == entry_->sha256;
    }
    if (!same)  // the receiver drops this file and answers with an error; ours says what happened
      return refuse(batch, changed());
    const nlohmann::json end = {{"type", "file_end"}};
    batch.add_control(end);
    ++stats.files_sent;
    file_ = UniqueFd();
    return {};
  }

  Error changed() const {
    return Error(errc::io_error, entry_->path + " changed while it was being sent; run again to send its new content");
  }

  static Error refuse(FrameBatch& batch, Error why) {
    const nlohmann::json msg = {{"type", "error"}, {"message", why.what()}};
    batch.add_control(msg);
    return why;
  }

  int root_;
  std::vector<const Entry*> files_;
  std::unordered_map<std::string, std::vector<std::string>> bases_;
  std::vector<PathRename> renames_;
  const HashCache* hashed_;
  std::optional<SendLimit> limit_;
  ReadBounds bounds_;
  std::vector<std::uint8_t> buf_;
  std::size_t next_ = 0;
  // The file being sent.
  const Entry* entry_ = nullptr;
  std::string source_;
  UniqueFd file_;
  struct stat opened_{};
  bool vouched_ = false, sparse_ = false, try_zstd_ = true;
  std::optional<ContentDigest> digest_;
  std::uint64_t size_ = 0, index_ = 0, read_bytes_ = 0;
  DataRun run_{0, 0};
  const std::vector<std::string>* base_ = nullptr;
  struct {
    const char* kind = "same";
    std::uint64_t count = 0;
  } pending_;
};

// The receiver's need message: the files in order, and the chunk digests it offered per file.
struct Needed {
  std::vector<const Entry*> files;
  std::unordered_map<std::string, std::vector<std::string>> bases;
  std::uint64_t total = 0;
};

Result<Needed> read_need(const nlohmann::json& need, const std::vector<Entry>& entries) {
  Needed out;
  std::unordered_map<std::string_view, const Entry*> files;
  files.reserve(entries.size());
  for (const auto& e : entries)
    if (e.type == EntryType::file) files[e.path] = &e;
  for (const auto& p : need["paths"]) {
    auto it = p.is_string() ? files.find(p.get_ref<const std::string&>()) : files.end();
    if (it == files.end()) return fail(errc::malformed, "asked for an unknown file");
    out.total += it->second->size;
    out.files.push_back(it->second);
  }
  if (need.contains("bases")) {
    const auto& b = need["bases"];
    if (!b.is_object()) return fail(errc::malformed, "bad chunk list");
    std::size_t count = 0;
    for (const auto& [path, list] : b.items()) {
      if (!files.count(path) || !list.is_array() || list.size() > kMaxBaseChunks ||
          (count += list.size()) > kMaxBaseChunksTotal)
        return fail(errc::malformed, "bad chunk list");
      std::vector<std::string> hashes;
      for (const auto& h : list) {
        if (!h.is_string() || !is_hex64(h.get_ref<const std::string&>())) return fail(errc::malformed, "bad chunk hash");
        hashes.push_back(h.get<std::string>());
      }
      out.bases[path] = std::move(hashes);
    }
  }
  return out;
}

}  // namespace

asio::awaitable<Result<TransferStats>> send_tree(MuxStream& stream, int root, const std::vector<Entry>& entries,
                                                 Progress progress, std::vector<PathRename> renames,
                                                 const HashCache* hashed, std::optional<SendLimit> limit) {
  TransferStats stats;
  stats.entries = entries.size();
  const std::string owner = stream.peer_name();
  auto wire = co_await offload(owner, [&] {
    std::vector<std::uint8_t> bytes = encode_manifest(entries);
    std::string digest = manifest_digest(bytes);
    return std::pair{std::move(bytes), std::move(digest)};
  });
  const nlohmann::json offer = {{"type", "offer"}, {"digest", wire.second}, {"entries", entries.size()}};
  if (auto r = co_await write_control(stream, offer); !r) co_return r.error();
  auto answer = co_await read_control(stream);
  if (!answer) co_return answer.error();
  if ((*answer)["type"] == "synced") {
    stats.unchanged = true;
    co_return stats;
  }
  if ((*answer)["type"] != "send_manifest") co_return fail(errc::malformed, "expected synced or send_manifest");
  if (auto r = co_await write_frame(stream, FrameType::manifest, wire.first); !r) co_return r.error();
  auto need = co_await read_control(stream);
  if (!need) co_return need.error();
  if ((*need)["type"] != "need" || !(*need)["paths"].is_array()) co_return fail(errc::malformed, "expected need");
  auto needed = co_await offload(owner, [&] {
    if (hashed) hashed->index();
    return read_need(*need, entries);
  });
  if (!needed) co_return needed.error();
  const std::uint64_t total = needed->total;
  // Every needed file goes back to back, no round trip per file; the receiver
  // answers once at the end (or with an error, which the next read sees).
  FrameBatch batch(stream);
  // A sender for a peer (with a limit) refuses files whose holes its filesystem hides.
  const ReadBounds bounds{stream.stop_token(), limit.has_value()};
  FileSender sender(root, std::move(needed->files), std::move(needed->bases), std::move(renames), hashed, std::move(limit),
                    bounds);
  for (bool done = false; !done;) {
    auto filled = co_await offload(owner, [&] { return sender.fill(batch, stats); });
    if (!filled) {
      (void)co_await batch.flush();  // with the error frame, when the receiver should hear of it
      co_return filled.error();
    }
    done = *filled;
    if (auto r = co_await batch.flush(); !r) co_return r.error();
    if (progress && (total > 0 || done)) progress(stats.bytes + stats.reused_bytes, total);
  }
  auto done = co_await read_control(stream);
  if (!done) co_return done.error();
  if ((*done)["type"] != "synced") co_return fail(errc::malformed, "expected synced");
  if ((*done)["deleted"].is_number_unsigned()) stats.deleted = (*done)["deleted"].get<std::size_t>();
  co_return stats;
}

}  // namespace runsnack::fs
