#include "fs/receive_writer.hpp"
#include "fs/content_digest.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace runsnack::fs {
namespace {

namespace asio = boost::asio;

struct Workspace {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("receive_writer_test_" + std::to_string(::getpid()));
  UniqueFd root;
  Workspace() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
    root = UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  ~Workspace() { std::filesystem::remove_all(path); }
  std::string read(const std::string& rel) const {
    std::ifstream in(path / rel, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Names in the top folder, temp and resume files included.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

Entry file_entry(const std::string& path, const std::string& data) {
  ContentDigest digest;
  digest.update(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
  return {path, EntryType::file, data.size(), false, digest.finish(), ""};
}

std::unique_ptr<std::uint8_t[]> bytes_of(const std::string& s) {
  auto p = std::make_unique_for_overwrite<std::uint8_t[]>(s.size());
  std::memcpy(p.get(), s.data(), s.size());
  return p;
}

// Drives `feed` (which queues pieces) and then finish() on one io_context, as receive_tree does.
Result<WrittenStats> run_writer(int root, HashCache* cache, const std::function<void(ReceiveWriter&)>& feed,
                                WriteLimits limits = {}) {
  asio::io_context io;
  std::optional<Result<WrittenStats>> out;
  ReceiveWriter writer(io.get_executor(), root, cache, std::move(limits));
  feed(writer);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> { out = co_await writer.finish(); }, asio::detached);
  io.run();
  return *out;
}

TEST(ReceiveWriter, WritesFilesInOrderAndRecordsTheirHashes) {
  Workspace ws;
  HashCache cache{0};  // no racy window: find() answers at once
  const std::string a = "alpha", b(300'000, 'b');
  const Entry ea = file_entry("a.txt", a), eb = file_entry("b.bin", b);
  auto r = run_writer(ws.root.get(), &cache, [&](ReceiveWriter& w) {
    w.begin(ea, std::nullopt);
    w.data(bytes_of(a), a.size(), false);
    w.end();
    w.begin(eb, std::nullopt);
    auto z = maybe_compress(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(b.data()), kMaxDataBytes));
    ASSERT_TRUE(z);  // a run of one byte compresses
    w.data(bytes_of(std::string(z->begin(), z->end())), z->size(), true);
    const std::string rest = b.substr(kMaxDataBytes);
    w.data(bytes_of(rest), rest.size(), false);
    w.end();
  });
  ASSERT_TRUE(r) << r.error().what();
  EXPECT_EQ(r->files, 2u);
  EXPECT_EQ(r->bytes, a.size() + b.size());
  EXPECT_EQ(ws.read("a.txt"), a);
  EXPECT_EQ(ws.read("b.bin"), b);
  EXPECT_EQ(ws.names(), (std::vector<std::string>{"a.txt", "b.bin"}));
  // The cache holds each file's hash under its stamp after the rename.
  DirCursor cursor(ws.root.get());
  auto stamp = stamp_at(cursor, "b.bin");
  ASSERT_TRUE(stamp);
  EXPECT_EQ(cache.find("b.bin", *stamp), eb.sha256);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(ReceiveWriter, FewerBytesThanAnnouncedFailAndLeaveNothing) {
  Workspace ws;
  Entry e = file_entry("x", "expected");
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(e, std::nullopt);
    w.data(bytes_of("exp"), 3, false);
    w.end();
  });
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.error().what()).find("fewer bytes"), std::string::npos);
  EXPECT_TRUE(ws.names().empty());  // no file, no temp file
}

// A base (our older copy) opened for reading, as receive_tree offers it.
Base base_of(const Workspace& ws, const std::string& rel) {
  Base b;
  b.fd = UniqueFd(::open((ws.path / rel).c_str(), O_RDONLY | O_CLOEXEC));
  b.size = std::filesystem::file_size(ws.path / rel);
  b.chunks = static_cast<std::size_t>((b.size + kChunkBytes - 1) / kChunkBytes);
  return b;
}

TEST(ReceiveWriter, FileRebuiltFromOurOlderCopyIsHashed) {
  Workspace ws;
  const std::string old_copy = std::string(kChunkBytes, 'o') + std::string(kChunkBytes, 'p');
  const std::string fresh = std::string(kChunkBytes, 'o') + std::string(kChunkBytes, 'n');
  {
    std::ofstream(ws.path / "f", std::ios::binary) << old_copy;
  }
  const Entry good = file_entry("f", fresh);
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(good, base_of(ws, "f"));
    w.same(1);
    w.data(bytes_of(fresh.substr(kChunkBytes)), kChunkBytes, false);
    w.end();
  });
  ASSERT_TRUE(r) << r.error().what();
  EXPECT_EQ(r->reused_bytes, kChunkBytes);
  EXPECT_EQ(ws.read("f"), fresh);

  // The same pieces against a manifest hash they do not produce: refused, the file untouched.
  Entry wrong = good;
  wrong.sha256 = std::string(64, '0');
  auto bad = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(wrong, base_of(ws, "f"));
    w.same(1);
    w.data(bytes_of(std::string(kChunkBytes, 'x')), kChunkBytes, false);
    w.end();
  });
  ASSERT_FALSE(bad);
  EXPECT_NE(std::string(bad.error().what()).find("checksum mismatch"), std::string::npos);
  EXPECT_EQ(ws.read("f"), fresh);
  EXPECT_EQ(ws.names(), std::vector<std::string>{"f"});
}

TEST(ReceiveWriter, MoreBytesThanAnnouncedStopsEverythingAfter) {
  Workspace ws;
  const Entry small = file_entry("small", "abc"), next = file_entry("next", "n");
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(small, std::nullopt);
    w.data(bytes_of("abcdef"), 6, false);
    w.end();
    w.begin(next, std::nullopt);  // dropped: the writer stopped at the first error
    w.data(bytes_of("n"), 1, false);
    w.end();
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::too_large);
  EXPECT_TRUE(ws.names().empty());
}

TEST(ReceiveWriter, SameWithoutAnOfferedBaseIsRefused) {
  Workspace ws;
  const Entry e = file_entry("f", std::string(kChunkBytes, 'f'));
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(e, std::nullopt);
    w.same(1);
    w.end();
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::malformed);
  EXPECT_TRUE(ws.names().empty());
}

TEST(ReceiveWriter, AbortKeepsALongPrefixForResume) {
  Workspace ws;
  const std::string data(3 * kChunkBytes, 'r');
  const Entry e = file_entry("big", data);
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(e, std::nullopt);
    w.data(bytes_of(data.substr(0, kChunkBytes)), kChunkBytes, false);
    w.data(bytes_of(data.substr(kChunkBytes, kChunkBytes)), kChunkBytes, false);
    w.abort();
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->files, 0u);
  EXPECT_EQ(ws.names(), std::vector<std::string>{resume_name("big")});
  EXPECT_EQ(ws.read(resume_name("big")), data.substr(0, 2 * kChunkBytes));
}

// A sparse file's holes are left as holes: the file has its size and few blocks.
TEST(ReceiveWriter, HolesStayHoles) {
  Workspace ws;
  const std::string head(kChunkBytes, 'h');
  const std::uint64_t hole_chunks = 4096;  // 1 GiB
  const std::uint64_t size = kChunkBytes * (1 + hole_chunks) + 10;
  ContentDigest digest;
  digest.update(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(head.data()), head.size()));
  digest.zeros(size - kChunkBytes);
  const Entry e{"sparse", EntryType::file, size, false, digest.finish(), ""};
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(e, std::nullopt);
    w.data(bytes_of(head), head.size(), false);
    w.hole(hole_chunks + 1);  // the last one is short: 10 bytes
    w.end();
  });
  ASSERT_TRUE(r) << r.error().what();
  struct stat st{};
  ASSERT_EQ(::stat((ws.path / "sparse").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), size);
  EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, 8u << 20);
  EXPECT_EQ(r->bytes, head.size());  // holes are not written
}

TEST(ReceiveWriter, HolePastTheEndIsRefused) {
  Workspace ws;
  const Entry e = file_entry("f", std::string(10, 'x'));
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(e, std::nullopt);
    w.hole(2);
    w.end();
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::malformed);
}

TEST(ReceiveWriter, LimitStopsAPullAndOwnerIsApplied) {
  Workspace ws;
  const std::string data(3 * kChunkBytes, 'l');
  const Entry e = file_entry("big", data);
  WriteLimits limits;
  limits.max_bytes = kChunkBytes;
  limits.over_message = "the pull is over its 256 KB limit (--max-pull)";
  auto r = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(e, std::nullopt);
    for (int i = 0; i < 3; ++i) w.data(bytes_of(data.substr(i * kChunkBytes, kChunkBytes)), kChunkBytes, false);
    w.end();
  }, limits);
  ASSERT_FALSE(r);
  EXPECT_EQ(std::string(r.error().what()), limits.over_message);
  EXPECT_TRUE(ws.names().empty());
  if (::geteuid() != 0) return;  // only root can give files away
  WriteLimits owned;
  owned.owner = Owner{12345, 23456};
  const Entry small = file_entry("sub/owned", "o");
  auto ok = run_writer(ws.root.get(), nullptr, [&](ReceiveWriter& w) {
    w.begin(small, std::nullopt);
    w.data(bytes_of("o"), 1, false);
    w.end();
  }, owned);
  ASSERT_TRUE(ok) << ok.error().what();
  struct stat st{};
  ASSERT_EQ(::stat((ws.path / "sub" / "owned").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  EXPECT_EQ(st.st_gid, 23456u);
  ASSERT_EQ(::stat((ws.path / "sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);  // the folder made on the way too
}

TEST(ReceiveWriter, ManyQueuedBytesWaitForRoomWithoutLosingAny) {
  Workspace ws;
  const std::size_t chunks = 2 * ReceiveWriter::kMaxQueuedBytes / kChunkBytes + 3;
  std::string data;
  for (std::size_t i = 0; i < chunks; ++i) data += std::string(kChunkBytes, static_cast<char>('a' + i % 26));
  const Entry e = file_entry("large", data);
  asio::io_context io;
  std::optional<Result<WrittenStats>> out;
  ReceiveWriter writer(io.get_executor(), ws.root.get(), nullptr);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    writer.begin(e, std::nullopt);
    for (std::size_t i = 0; i < chunks; ++i) {
      writer.data(bytes_of(data.substr(i * kChunkBytes, kChunkBytes)), kChunkBytes, false);
      co_await writer.wait_for_room();
    }
    writer.end();
    out = co_await writer.finish();
  }, asio::detached);
  io.run();
  ASSERT_TRUE(out && *out);
  EXPECT_EQ((*out)->bytes, data.size());
  EXPECT_EQ(ws.read("large"), data);
}

}  // namespace
}  // namespace runsnack::fs
