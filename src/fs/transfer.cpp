#include "fs/transfer.hpp"

#include "core/json_fields.hpp"
#include "fs/offload.hpp"
#include "fs/path_rules.hpp"
#include "fs/read_bounds.hpp"
#include "fs/tree_scan.hpp"
#include "fs/receive_writer.hpp"

#include <boost/asio/this_coro.hpp>
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

std::string source_of(const std::vector<PathRename>& renames, const std::string& p) {
  for (const auto& r : renames) {
    if (p == r.wire) return r.source;
    if (p.size() > r.wire.size() && p[r.wire.size()] == '/' && p.starts_with(r.wire)) return r.source + p.substr(r.wire.size());
  }
  return p;
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

// Every symlink of the manifest must stay inside the tree with each symlink on its way followed:
// those of the manifest (which the receiver is about to make) and, for paths it does not name,
// those already on disk.
Result<void> check_links(int root, const std::vector<Entry>& entries) {
  std::unordered_map<std::string_view, const Entry*> by_path;
  bool any = false;
  for (const auto& e : entries) {
    by_path[e.path] = &e;
    any |= e.type == EntryType::link;
  }
  if (!any) return {};
  const LinkLookup link_of = [&](const std::string& path) -> std::optional<std::string> {
    if (auto it = by_path.find(path); it != by_path.end())
      return it->second->type == EntryType::link ? std::optional<std::string>(it->second->target) : std::nullopt;
    return link_target_at(root, path);
  };
  for (const auto& e : entries)
    if (e.type == EntryType::link && !symlink_resolves_inside(e.path, e.target, link_of))
      return fail(errc::invalid_argument, "refused symlink '" + e.path + "' -> '" + e.target.substr(0, 200) +
                                              "': it resolves outside the destination through the symlinks on its way");
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
    // Its chunks are hashed to be offered: not a file whose holes would be read (read_bounds.hpp).
    if (!check_unseen_holes(fd, st)) continue;
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
  rules.add_project_defaults();  // as run's sync scans (cli/cmd_run.cpp)
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
    if ((*j)["type"] == "hole" && (*j)["chunks"].is_number_unsigned()) {
      writer.hole((*j)["chunks"].get<std::uint64_t>());
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

bool SyncState::save(const std::filesystem::path& base) {
  (void)::mkdir(base.parent_path().c_str(), 0700);
  std::filesystem::path hashes_file = base;
  hashes_file += ".hashes";
  std::filesystem::path file = base, tmp = base;
  file += ".manifest";
  tmp += ".manifest.tmp";
  const std::vector<std::uint8_t> wire = encode_manifest(entries);
  bool written = hashes.save(hashes_file);
  if (written) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(digest.data(), static_cast<std::streamsize>(digest.size()));
    out.write(reinterpret_cast<const char*>(wire.data()), static_cast<std::streamsize>(wire.size()));
    out.close();
    written = !out.fail();
  }
  std::error_code ec;
  if (written) std::filesystem::rename(tmp, file, ec);
  if (!written || ec) {
    remove(base);
    hashes.mark_unsaved();
    return false;
  }
  return true;
}

void SyncState::remove(const std::filesystem::path& base) {
  for (const char* suffix : {".manifest", ".manifest.tmp", ".hashes", ".hashes.tmp"}) {
    std::filesystem::path f = base;
    f += suffix;
    ::unlink(f.c_str());
  }
}

std::size_t SyncState::memory_bytes() const {
  // A string's heap block beyond its inline 15 bytes, with the allocator's own overhead.
  constexpr std::size_t kBlockOverhead = 16;
  auto heap = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 + kBlockOverhead : 0; };
  std::size_t bytes = sizeof(*this) + digest.capacity() + entries.capacity() * sizeof(Entry) + hashes.memory_bytes();
  for (const auto& e : entries) bytes += heap(e.path) + heap(e.sha256) + heap(e.target);
  return bytes;
}

namespace {

// What the receiver decides from the manifest, off the io thread: the tree's folders and links
// made, the files it needs, and its older copies of large ones (chunk digests offered).
struct ReceivePlan {
  std::vector<Entry> entries;
  std::unordered_map<std::string_view, const Entry*> wanted;  // views into `entries`
  std::vector<std::string> need;
  std::unordered_map<std::string, Base> bases;
  nlohmann::json offered = nlohmann::json::object();
  std::uint64_t total = 0;
};

Result<std::unique_ptr<ReceivePlan>> plan_receive(int root, std::span<const std::uint8_t> manifest,
                                                  const ReceiveLimits& limits, HashCache* cache) {
  auto entries = parse_manifest(manifest);
  if (!entries) return entries.error();
  if (!limits.asked.empty())
    if (auto extra = first_unasked(*entries, limits.asked))
      return fail(errc::refused, "refused '" + extra->substr(0, 200) + "': the sender sent a path that was not asked for");
  if (auto r = check_quota(*entries, limits); !r) return r.error();
  if (!limits.links_may_point_outside)
    if (auto r = check_links(root, *entries); !r) return r.error();
  auto plan = std::make_unique<ReceivePlan>();
  plan->entries = std::move(*entries);
  DirCursor cursor(root, limits.write.owner);
  std::map<std::string, Entry> have;
  plan->wanted.reserve(plan->entries.size());
  for (const auto& e : plan->entries) {
    plan->wanted[e.path] = &e;
    auto now = stat_entry(cursor, e.path, e.type == EntryType::file ? cache : nullptr);
    Result<void> r;
    if (e.type == EntryType::dir && !(now && now->type == EntryType::dir)) r = make_dir(cursor, e.path);
    else if (e.type == EntryType::link && !(now && now->type == EntryType::link && now->target == e.target))
      r = make_symlink(cursor, e.path, e.target);
    else if (now) have[e.path] = *now;
    // The same content under another mode (chmod +x): the mode changes in place, nothing travels.
    if (r && e.type == EntryType::file && now && now->type == EntryType::file && now->sha256 == e.sha256 &&
        now->executable != e.executable)
      r = set_executable(cursor, e.path, e.executable);
    if (!r) return r.error();
  }
  plan->need = files_to_fetch(plan->entries, have);
  for (const auto& p : plan->need) plan->total += plan->wanted[p]->size;
  // Large needed files we hold a copy or a prefix of: offer their chunk hashes.
  std::size_t offered_chunks = 0;
  for (const auto& p : plan->need) {
    if (plan->wanted[p]->size < kChunkedMinBytes || offered_chunks >= kMaxBaseChunksTotal) continue;
    auto base = open_base(cursor, p);
    if (!base) continue;
    auto hashes = chunk_hashes(base->fd.get(), base->size, std::min(kMaxBaseChunks, kMaxBaseChunksTotal - offered_chunks));
    if (!hashes || hashes->empty()) continue;
    offered_chunks += hashes->size();
    base->chunks = hashes->size();
    plan->offered[p] = std::move(*hashes);
    plan->bases.emplace(p, std::move(*base));
  }
  return plan;
}

// After a whole sync: what the sender no longer has goes, and the state remembers this manifest.
std::size_t settle_sync(int root, SyncState& state, ReceivePlan& plan, std::span<const std::uint8_t> manifest,
                        const std::optional<Owner>& owner) {
  std::size_t deleted = 0;
  DirCursor cursor(root, owner);
  // Deepest first (a manifest lists a folder before its contents), so emptied folders go too.
  // What the sender now ignores stays, as rsync's --delete leaves excluded files.
  const IgnoreRules ignored = synced_ignore_rules(root);
  for (auto it = state.entries.rbegin(); it != state.entries.rend(); ++it)
    if (!plan.wanted.count(it->path) && !ignored_here_or_above(ignored, *it) && remove_synced(cursor, *it, state.hashes))
      ++deleted;
  state.digest = manifest_digest(manifest);
  state.entries = std::move(plan.entries);
  plan.wanted.clear();
  state.hashes.retain(state.entries);
  state.hashes.settle();
  return deleted;
}

}  // namespace

asio::awaitable<Result<TransferStats>> receive_tree(MuxStream& stream, int root, ReceiveLimits limits,
                                                    SyncState* state, Progress progress) {
  TransferStats stats;
  // Checked while the offer is on its way: the sender opens the stream before it scans its tree.
  bool kept = false;
  if (state && !state->digest.empty()) kept = co_await offload([&] { return tree_unchanged(root, state->entries, state->hashes); });
  // A receiver that holds no unchanged tree will ask for the manifest whatever the offer says: it
  // asks at once, so the ask crosses the offer instead of following it (a round trip less for a
  // first sync, which the sender's scan does not hide when it ends before the session is up).
  const nlohmann::json ask = {{"type", "send_manifest"}};
  if (!kept) {
    if (auto r = co_await write_control(stream, ask); !r) co_return r.error();
  }
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
  if (kept) {
    if (auto r = co_await write_control(stream, ask); !r) co_return r.error();
  }
  auto frame = co_await read_frame(stream);
  if (!frame) co_return frame.error();
  if (frame->type != FrameType::manifest) co_return fail(errc::malformed, "expected a manifest");
  HashCache* cache = state ? &state->hashes : nullptr;
  auto planned = co_await offload([&] { return plan_receive(root, frame->payload, limits, cache); });
  if (!planned) {
    co_await send_error(stream, planned.error());
    co_return planned.error();
  }
  ReceivePlan& plan = **planned;
  stats.entries = plan.entries.size();
  nlohmann::json need_msg = {{"type", "need"}, {"paths", plan.need}};
  if (!plan.offered.empty()) need_msg["bases"] = std::move(plan.offered);
  if (auto r = co_await write_control(stream, need_msg); !r) co_return r.error();
  // Files are written on the writer's thread while this one reads the next frames.
  std::uint64_t announced = 0;  // bytes of the files received completely, for progress
  ReceiveWriter writer(co_await asio::this_coro::executor, root, cache, limits.write);
  for (const auto& path : plan.need) {
    const Entry& entry = *plan.wanted[path];
    auto begin = co_await read_control(stream);
    if (!begin) {
      co_await writer.finish();
      co_return begin.error();
    }
    if ((*begin)["type"] != "file" || (*begin)["path"] != path) {
      co_await writer.finish();  // the files that arrived whole are kept
      co_return fail(errc::malformed, "expected file " + path);
    }
    const auto base_it = plan.bases.find(path);
    std::optional<Base> base;
    if (base_it != plan.bases.end()) {
      base = std::move(base_it->second);
      plan.bases.erase(base_it);
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
    if (progress) progress(announced, plan.total);
  }
  auto written = co_await writer.finish();
  if (!written) {
    co_await send_error(stream, written.error());
    co_return written.error();
  }
  stats.bytes = written->bytes;
  stats.reused_bytes = written->reused_bytes;
  stats.files_sent = written->files;
  if (state)
    stats.deleted = co_await offload([&] { return settle_sync(root, *state, plan, frame->payload, limits.write.owner); });
  stats.bytes -= stats.reused_bytes;  // what travelled
  const nlohmann::json synced = {{"type", "synced"}, {"files", stats.files_sent}, {"bytes", stats.bytes},
                                 {"reused_bytes", stats.reused_bytes}, {"deleted", stats.deleted}};
  if (auto r = co_await write_control(stream, synced); !r) co_return r.error();
  co_return stats;
}

}  // namespace runsnack::fs
