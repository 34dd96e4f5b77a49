// The transfer protocol (transfer.hpp) between a real receive_tree and a sender, over a Mux on
// loopback TCP: when the receiver asks for the manifest.
#include "fs/manifest.hpp"
#include "fs/transfer.hpp"
#include "fs/tree_scan.hpp"
#include "net/transport.hpp"
#include "net/yamux_session.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

namespace runsnack::fs {
namespace {

namespace asio = boost::asio;
namespace sfs = std::filesystem;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

sfs::path temp_dir(const char* name) {
  sfs::path p = sfs::temp_directory_path() / (std::string("rs-transfer-") + name + "-" + std::to_string(::getpid()));
  sfs::remove_all(p);
  sfs::create_directories(p);
  return p;
}

// Both ends of a Mux over loopback TCP, run on `io`.
struct MuxPair {
  std::shared_ptr<Mux> sender, receiver;
  explicit MuxPair(asio::io_context& io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    tcp::socket a(io);
    a.connect(acceptor.local_endpoint());
    tcp::socket b = acceptor.accept();
    sender = Mux::create(make_tcp_transport(std::move(a)), yamux::Role::client);
    receiver = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server);
    asio::co_spawn(io, sender->run(), asio::detached);
    asio::co_spawn(io, receiver->run(), asio::detached);
  }
};

// Runs the receiver on the next stream the sender opens, and `sender_side` on that stream.
// Fails the test when the two have not both finished within a few seconds (a side waiting for
// what the other never says).
void exchange(MuxPair& pair, asio::io_context& io, int root, SyncState* state,
              std::function<awaitable<void>(MuxStream&)> sender_side, ReceiveLimits limits = {},
              std::optional<Result<TransferStats>>* outcome = nullptr) {
  bool sent = false, received = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    auto stream = co_await pair.receiver->accept_stream();
    if (!stream) co_return;
    // Named first: GCC 12 mishandles temporaries in an expression that also co_awaits.
    Progress progress;
    auto got = co_await receive_tree(**stream, root, std::move(limits), state, progress);
    if (outcome) outcome->emplace(std::move(got));
    received = true;
  }, asio::detached);
  asio::co_spawn(io, [&]() -> awaitable<void> {
    auto stream = co_await pair.sender->open_stream();
    if (!stream) co_return;
    co_await sender_side(**stream);
    (void)co_await (*stream)->close_write();
    sent = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.restart();
  for (auto until = std::chrono::steady_clock::now() + 10s; !(sent && received) && std::chrono::steady_clock::now() < until;)
    io.run_for(50ms);
  EXPECT_TRUE(sent) << "the sender's side did not finish";
  EXPECT_TRUE(received) << "receive_tree did not finish";
}

struct Trees {
  sfs::path from = temp_dir("from"), to = temp_dir("to");
  UniqueFd from_fd, to_fd;
  std::vector<Entry> entries;
  Trees() {
    std::ofstream(from / "a.txt") << "hello\n";
    from_fd = std::move(*open_root(from, false));
    to_fd = std::move(*open_root(to, false));
    entries = *scan_tree(from_fd.get(), "", IgnoreRules{}, nullptr);
  }
  ~Trees() {
    sfs::remove_all(from);
    sfs::remove_all(to);
  }
  nlohmann::json offer() const {
    return {{"type", "offer"}, {"digest", manifest_digest(encode_manifest(entries))}, {"entries", entries.size()}};
  }
};

TEST(ReceiveTree, AReceiverHoldingNoTreeAsksForTheManifestBeforeTheOffer) {
  // The ask crosses the offer: a first sync waits a round trip less for it.
  asio::io_context io;
  MuxPair pair(io);
  Trees trees;
  SyncState empty;
  nlohmann::json first;
  exchange(pair, io, trees.to_fd.get(), &empty, [&](MuxStream& s) -> awaitable<void> {
    auto said = co_await read_control(s);  // nothing written yet
    if (said) first = *said;
  });
  EXPECT_EQ(first.value("type", ""), "send_manifest") << first.dump();
}

TEST(ReceiveTree, AReceiverHoldingTheTreeStillAnswersItsOfferSyncedFirst) {
  asio::io_context io;
  MuxPair pair(io);
  Trees trees;
  SyncState state;
  exchange(pair, io, trees.to_fd.get(), &state, [&](MuxStream& s) -> awaitable<void> {
    Progress progress;
    auto sent = co_await send_tree(s, trees.from_fd.get(), trees.entries, progress);
    EXPECT_TRUE(sent) << sent.error().what();
  });
  ASSERT_TRUE(sfs::exists(trees.to / "a.txt"));
  ASSERT_FALSE(state.digest.empty());
  nlohmann::json first;
  exchange(pair, io, trees.to_fd.get(), &state, [&](MuxStream& s) -> awaitable<void> {
    const nlohmann::json offer = trees.offer();
    (void)co_await write_control(s, offer);
    auto said = co_await read_control(s);
    if (said) first = *said;
  });
  EXPECT_EQ(first.value("type", ""), "synced") << "an unchanged tree is answered at once, with no ask before it: "
                                               << first.dump();
}

// A symlink that points outside: the run workspace takes it as it is (it resolves in the sandbox);
// any other receiver (a pull into the user's folder) refuses it.
TEST(ReceiveTree, SymlinksPointingOutsideLandOnlyWhereTheReceiverAllowsThem) {
  for (bool allowed : {true, false}) {
    SCOPED_TRACE(allowed ? "workspace" : "pull");
    asio::io_context io;
    MuxPair pair(io);
    Trees trees;
    sfs::create_symlink("/usr/bin/python3", trees.from / "python3");
    sfs::create_symlink("../../outside", trees.from / "up");
    trees.entries = *scan_tree(trees.from_fd.get(), "", IgnoreRules{}, nullptr);
    ReceiveLimits limits;
    limits.links_may_point_outside = allowed;
    std::optional<Result<TransferStats>> outcome;
    exchange(pair, io, trees.to_fd.get(), nullptr, [&](MuxStream& s) -> awaitable<void> {
      Progress progress;
      (void)co_await send_tree(s, trees.from_fd.get(), trees.entries, progress);
    }, limits, &outcome);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(static_cast<bool>(*outcome), allowed);
    EXPECT_EQ(sfs::is_symlink(trees.to / "python3"), allowed);
    if (allowed) {
      EXPECT_EQ(sfs::read_symlink(trees.to / "python3"), "/usr/bin/python3");
      EXPECT_EQ(sfs::read_symlink(trees.to / "up"), "../../outside");
      EXPECT_TRUE(sfs::exists(trees.to / "a.txt"));
    } else {
      EXPECT_NE(outcome->error().what().find("outside"), std::string::npos) << outcome->error().what();
    }
  }
}

TEST(SyncState, SavedInAFolderOfItsOwnAndLoadedBack) {
  const sfs::path dir = temp_dir("state");
  SyncState state;
  state.digest = std::string(64, 'd');
  state.entries.push_back({"a.txt", EntryType::file, 1, false, std::string(64, '0'), ""});
  state.hashes.put("a.txt", {}, std::string(64, '0'), 0);
  ASSERT_TRUE(state.save(dir / ".runsnack-sync" / "default"));
  EXPECT_EQ(sfs::status(dir / ".runsnack-sync").permissions(), sfs::perms::owner_all);
  SyncState loaded;
  loaded.load(dir / ".runsnack-sync" / "default");
  EXPECT_EQ(loaded.digest, state.digest);
  EXPECT_EQ(loaded.entries, state.entries);
  EXPECT_GT(loaded.memory_bytes(), sizeof(SyncState));
  sfs::remove_all(dir);
}

TEST(SyncState, OneThatDoesNotFitLeavesNoStateBehind) {
  // A full quota image, played by RLIMIT_FSIZE: the write fails part way (EFBIG, SIGXFSZ ignored).
  const sfs::path dir = temp_dir("full");
  const sfs::path base = dir / ".runsnack-sync" / "default";
  SyncState small;
  small.digest = std::string(64, 'a');
  small.entries.push_back({"a", EntryType::file, 0, false, std::string(64, '0'), ""});
  ASSERT_TRUE(small.save(base));  // an older state that fitted
  SyncState big;
  big.digest = std::string(64, 'b');
  for (int i = 0; i < 100; ++i) {
    const std::string path = std::to_string(i) + "/" + std::string(3000, 'x');
    big.entries.push_back({path, EntryType::file, 0, false, std::string(64, '0'), ""});
    big.hashes.put(path, {}, std::string(64, '0'), 0);
  }
  struct rlimit was{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &was), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small_files = was;
  small_files.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small_files), 0);
  const bool saved = big.save(base);
  ::setrlimit(RLIMIT_FSIZE, &was);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(saved);
  for (const char* left : {"default.manifest", "default.hashes", "default.manifest.tmp", "default.hashes.tmp"})
    EXPECT_FALSE(sfs::exists(dir / ".runsnack-sync" / left)) << left;
  SyncState loaded;
  loaded.load(base);
  EXPECT_TRUE(loaded.digest.empty()) << "an older state than the workspace holds was left to load";
  // With room again, the next save writes both files, the hashes too (nothing changed in them since).
  ASSERT_TRUE(big.save(base));
  EXPECT_TRUE(sfs::exists(dir / ".runsnack-sync" / "default.hashes"));
  sfs::remove_all(dir);
}

}  // namespace
}  // namespace runsnack::fs
