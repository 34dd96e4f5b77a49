#pragma once
// What `run` (cmd_run.cpp) and `cp` (cmd_cp.cpp) share on the consumer's side of a transfer:
// the --max-pull limits, the progress bar, the counters for --json, scans off the io thread,
// and a tree sent or received over one stream of the run or cp service.

#include "fs/ignore_rules.hpp"
#include "fs/transfer.hpp"
#include "fs/tree_scan.hpp"
#include "session/session.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <future>
#include <string>
#include <vector>

namespace runsnack::cli {

// What one pull or `cp` from the workspace may write here (file data; holes of sparse files do
// not count): `flag` is --max-pull, "" its default.
Result<fs::ReceiveLimits> pull_limits(const std::string& flag);
// The counters of one transfer, for --json.
nlohmann::json stats_json(const char* event, const fs::TransferStats& s);
// 1536 -> "1.5 KiB".
std::string human(std::uint64_t n);
// A progress bar on stderr for a person at a terminal (nothing otherwise).
fs::Progress progress_bar(const char* what);
// "out//" -> "out": what users type; a trailing slash only says "a folder".
std::string without_trailing_slashes(std::string path);

// On stderr, one line each, what a scan of the user's folder left out (nothing when nothing was):
//   sync: skipped 2 entries: f (a FIFO), secret.txt (permission denied)
//   sync: not sent: .venv (a virtualenv), pkg/__pycache__ (Python bytecode); a "!.venv/" line in
//         .runsnackignore sends it
// `label` starts the line ("sync", "cp").
void print_skipped(const char* label, const fs::ScanReport& report);
void print_defaulted(const char* label, const fs::ScanReport& report);

using ScanJob = std::future<Result<std::vector<fs::Entry>>>;
// Waits for a scan running on a thread of its own (hashing a large tree takes seconds, and the
// session's keepalive must be answered meanwhile).
boost::asio::awaitable<Result<std::vector<fs::Entry>>> scan_result(ScanJob& job);
boost::asio::awaitable<Result<std::vector<fs::Entry>>> scan_off_thread(int root, std::string prefix, fs::IgnoreRules rules,
                                                                       fs::HashCache* cache,
                                                                       fs::ScanReport* report = nullptr);

boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_mode(Session& session, const char* service,
                                                                     nlohmann::json args);
// Sends `entries` (read from `root`) to the provider: cp put.
boost::asio::awaitable<Result<fs::TransferStats>> upload(Session& session, const char* service, nlohmann::json args,
                                                         int root, std::vector<fs::Entry> entries,
                                                         std::vector<fs::PathRename> renames,
                                                         const fs::HashCache* hashed);
// Receives files from the provider into `root`: run --pull and cp get. The receiver checks every
// path and symlink (a symlink chain that resolves outside `root` is refused) and `limits`.
boost::asio::awaitable<Result<fs::TransferStats>> download(Session& session, const char* service, nlohmann::json args,
                                                           int root, fs::ReceiveLimits limits);

}  // namespace runsnack::cli
