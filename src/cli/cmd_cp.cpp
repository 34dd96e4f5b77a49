// `runsnack cp`: copy files or folders between this machine and the workspace, either way, at any
// depth and several at once (the provider's side: services/exec/workspace_transfer.hpp).
#include "cli/cmd_cp.hpp"

#include "cli/link_arg.hpp"
#include "cli/session_runner.hpp"
#include "cli/transfers.hpp"
#include "cli/workspace_arg.hpp"
#include "core/json_fields.hpp"
#include "fs/ignore_rules.hpp"
#include "services/exec/exec_service.hpp"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

namespace runsnack::cli {

namespace asio = boost::asio;
namespace sfs = std::filesystem;

namespace {

struct CpArgs {
  std::vector<std::string> words;  // [LINK] SRC... DST as given
  std::string link, dst;
  std::vector<std::string> srcs;
  std::string max_pull;
  bool json = false;
  std::string workspace;  // --workspace, then the one used (workspace_arg.hpp)
};

// SRCs of one cp, LINK and DST besides: as many as one pull's paths (the provider's bound).
constexpr int kMaxCpWords = 256 + 2;

constexpr std::string_view kRemote = "remote:";

void add_stats(fs::TransferStats& sum, const fs::TransferStats& s) {
  sum.entries += s.entries;
  sum.files_sent += s.files_sent;
  sum.bytes += s.bytes;
  sum.reused_bytes += s.reused_bytes;
  sum.wire_bytes += s.wire_bytes;
}

int print_cp_stats(const CpArgs& args, const fs::TransferStats& stats, const char* verb) {
  if (args.json) {
    nlohmann::json line = stats_json("cp", stats);
    line["workspace"] = args.workspace;
    std::cout << line.dump() << std::endl;
  } else {
    std::cerr << "cp: " << stats.files_sent << " files, " << human(stats.bytes) << " " << verb << " (workspace "
              << args.workspace << ")" << std::endl;
  }
  return 0;
}

// A path the workspace does not hold: say which workspace was looked in, and how to pick another.
int report_in_workspace(const CpArgs& args, const Error& e) {
  if (!e.what().ends_with("no such file or folder")) return report(e);
  return report(e.what() + " in workspace " + args.workspace +
                " (the one of this folder; --workspace NAME picks another: runsnack workspaces LINK lists them)");
}

// What the workspace holds at `path` ("dir", "file", "link", "other", "none"), symlinks followed
// inside it; "" from a provider too old to say (it answers "unknown cp mode").
asio::awaitable<Result<std::string>> remote_kind(Session& session, const std::string& workspace, const std::string& path) {
  const nlohmann::json stat_args = in_workspace({{"mode", "stat"}, {"path", path}}, workspace);
  auto stream = co_await open_mode(session, exec::kServiceCp, stat_args);
  if (!stream) co_return stream.error();
  auto answer = co_await fs::read_control(**stream);  // an error frame comes back as an error
  (void)co_await (*stream)->close_write();
  if (!answer && answer.error().what() == "unknown cp mode") co_return std::string("");
  if (!answer) co_return answer.error();
  if ((*answer)["type"] != "stat") co_return Error(errc::malformed, "expected the provider's stat answer");
  co_return string_or(*answer, "kind");
}

// Local SRC... -> remote:DST. DST ending in '/' (or empty), or an existing remote folder, receives
// each SRC by its name (a missing one is created); otherwise the single SRC is copied to that name.
asio::awaitable<int> cp_put(const CpArgs& args, Session& session) {
  std::string dst = without_trailing_slashes(args.dst.substr(kRemote.size()));
  bool into = dst.empty() || args.dst.ends_with('/');
  if (dst == "/") co_return report("refused path '/': absolute paths are not allowed; remote:PATH is relative to the workspace");
  if (!into) {
    auto kind = co_await remote_kind(session, args.workspace, dst);
    if (!kind) co_return report(kind.error());
    into = *kind == "dir";
  }
  if (args.srcs.size() > 1 && !into)
    co_return report("several sources need a folder to copy into: end the destination with / (remote:" + dst +
                     "/, created when missing) or name an existing folder");
  fs::TransferStats total;
  for (const auto& word : args.srcs) {
    sfs::path src = sfs::absolute(word).lexically_normal();
    if (src.filename().empty()) src = src.parent_path();
    std::error_code ec;
    const auto status = sfs::symlink_status(src, ec);
    if (ec || !sfs::exists(status)) co_return report(word + ": no such file or folder");
    if (word.ends_with('/') && !sfs::is_directory(sfs::status(src, ec)))
      co_return report(word + ": not a folder (leave out the trailing /)");
    const std::string leaf = src.filename().string();
    std::string dest_dir = dst, name = leaf;
    if (!into) {
      const auto slash = dst.rfind('/');
      dest_dir = slash == std::string::npos ? "" : dst.substr(0, slash);
      name = dst.substr(slash == std::string::npos ? 0 : slash + 1);
    }
    auto root = fs::open_root(src.parent_path(), false);
    if (!root) co_return report(root.error());
    fs::IgnoreRules rules;
    fs::HashCache scanned;  // this scan's hashes: the sender vouches for files unchanged since
    fs::ScanReport left_out;
    auto entries = co_await scan_off_thread(root->get(), leaf, rules, &scanned, &left_out);
    if (!entries) co_return report(entries.error());
    print_skipped("cp", left_out);
    for (auto& e : *entries) e.path = name + e.path.substr(leaf.size());
    const nlohmann::json put_args = in_workspace({{"mode", "put"}, {"dest", dest_dir}}, args.workspace);
    std::vector<fs::PathRename> renames;
    if (name != leaf) renames.push_back({name, leaf});
    auto stats = co_await upload(session, exec::kServiceCp, put_args, root->get(), std::move(*entries), renames, &scanned);
    if (!stats) co_return report(stats.error());
    add_stats(total, *stats);
  }
  co_return print_cp_stats(args, total, "sent");
}

// remote:SRC... -> local DST. DST ending in '/' (created when missing) or an existing folder
// receives each SRC by its name (a nested SRC without the folders above it); otherwise the single
// SRC is copied to that name. --max-pull bounds all sources together.
asio::awaitable<int> cp_get(const CpArgs& args, Session& session) {
  const sfs::path dst = sfs::absolute(args.dst);
  std::error_code ec;
  const bool into = args.dst.ends_with('/') || sfs::is_directory(dst, ec);
  if (args.srcs.size() > 1 && !into)
    co_return report("several sources need a folder to copy into: end the destination with / (" + args.dst +
                     "/, created when missing) or name an existing folder");
  auto limits = pull_limits(args.max_pull);
  if (!limits) co_return report(limits.error());
  fs::TransferStats total;
  for (const auto& word : args.srcs) {
    const bool folder = word.ends_with('/');
    const std::string src = without_trailing_slashes(word.substr(kRemote.size()));
    if (src.empty() || src == "/")
      co_return report("'" + word + "' names the whole workspace: name a path in it, e.g. remote:out");
    const std::string leaf = src.substr(src.rfind('/') == std::string::npos ? 0 : src.rfind('/') + 1);
    const sfs::path local_dir = into ? dst : dst.parent_path();
    const std::string as = into ? leaf : dst.filename().string();
    auto root = fs::open_root(local_dir, true);
    if (!root) co_return report(root.error());
    nlohmann::json get_args = in_workspace({{"mode", "get"}, {"path", src}, {"as", as}}, args.workspace);
    if (folder) get_args["folder"] = true;
    fs::ReceiveLimits these = *limits;
    these.asked = {as};  // nothing else may land here
    auto stats = co_await download(session, exec::kServiceCp, get_args, root->get(), these);
    if (!stats) {
      if (src.find('/') != std::string::npos && stats.error().what().find("not asked for") != std::string::npos)
        co_return report(stats.error().what() + " (a provider older than this RunSnack sends a nested path with the "
                                                "folders above it: update it, or copy the top folder)");
      co_return report_in_workspace(args, stats.error());
    }
    add_stats(total, *stats);
    // The next source may write only what is left of --max-pull.
    const std::uint64_t written = stats->bytes + stats->reused_bytes;
    if (auto& left = limits->write.max_bytes) *left -= std::min(*left, written);
  }
  co_return print_cp_stats(args, total, "received");
}

asio::awaitable<int> cp_body(const CpArgs& args, Session& session) {
  std::size_t remote_srcs = 0;
  for (const auto& s : args.srcs) remote_srcs += s.starts_with(kRemote);
  const bool dst_remote = args.dst.starts_with(kRemote);
  if (dst_remote ? remote_srcs != 0 : remote_srcs != args.srcs.size())
    co_return report("cp copies one way: every SRC local and DST remote:PATH, or every SRC remote:PATH and DST local "
                     "(e.g. runsnack cp LINK remote:out ./)");
  // Not `c ? co_await a : co_await b`: GCC 12 runs both.
  if (dst_remote) co_return co_await cp_put(args, session);
  co_return co_await cp_get(args, session);
}

// [LINK] SRC... DST: the first word is LINK, except that with RUNSNACK_LINK set it may be left
// out; then a first word that names a workspace path (remote:...) or an existing local one is a SRC.
Result<void> split_cp_words(CpArgs& cp) {
  const char* env = std::getenv("RUNSNACK_LINK");
  const bool env_link = env && *env;
  const std::string& first = cp.words.front();
  std::error_code ec;
  const bool is_path = first.starts_with(kRemote) || sfs::exists(sfs::symlink_status(first, ec));
  std::size_t at = 0;
  if (cp.words.size() >= 3 && !(env_link && is_path)) cp.link = cp.words[at++];
  cp.srcs.assign(cp.words.begin() + static_cast<std::ptrdiff_t>(at), cp.words.end() - 1);
  cp.dst = cp.words.back();
  if (cp.srcs.empty()) return fail(errc::invalid_argument, "cp needs SRC and DST after LINK: runsnack cp LINK SRC... DST");
  return {};
}

}  // namespace

void add_cp_command(CLI::App& app, ExitStatus& status) {
  auto cp = std::make_shared<CpArgs>();
  auto* cpc = app.add_subcommand("cp", "Copy files or folders to or from the workspace: remote:PATH names the remote side");
  cpc->add_option("LINK SRC... DST", cp->words,
                  "LINK (may be left out when RUNSNACK_LINK is set; see runsnack info --help), then one or more SRC "
                  "and a DST: either every SRC local and DST remote:PATH, or every SRC remote:PATH and DST local")
      ->expected(2, kMaxCpWords)
      ->required();
  cpc->footer("remote:PATH is a path in the workspace at any depth (remote:inputs/data/nums.txt; remote: alone is\n"
              "the workspace as a destination). As with cp -r: a DST that ends in / (created when missing) or is an\n"
              "existing folder receives each SRC by its name, without the folders above it; otherwise the single\n"
              "SRC is copied to the name DST. Several SRCs need such a folder. A trailing / on SRC copies the\n"
              "folder itself (it must be one). A symlink on the way inside the workspace is followed; a path\n"
              "with .. or a symlink that leads out of the workspace is refused (and logged by the provider); a SRC\n"
              "that is itself a symlink is copied as a symlink.\n"
              "  runsnack cp LINK ./data remote:inputs/             upload a folder into inputs/data\n"
              "  runsnack cp LINK a.txt dir/ remote:inputs/         several sources into inputs/\n"
              "  runsnack cp LINK remote:out/logs/run1.txt ./        a nested file into ./run1.txt\n"
              "  runsnack cp LINK remote:out remote:ckpt/last.pt ./results/\n"
              "remote: is the workspace of this folder (the one `runsnack run` here syncs to); --workspace NAME\n"
              "picks another.\n"
              "With RUNSNACK_LINK set, leave LINK out (a first word that is remote:... or an existing local path is\n"
              "a SRC): runsnack cp remote:out ./");
  add_workspace_option(cpc, cp->workspace);
  cpc->add_flag("--json", cp->json, "Print the transfer's counters as one JSON object (bytes, wire_bytes, reused_bytes, ...)");
  cpc->add_option("--max-pull", cp->max_pull,
                  "From remote: refuse a copy that would write more file data than this here (default 10G)");
  cpc->callback([&status, cp] {
    if (auto r = split_cp_words(*cp); !r) {
      report(r.error());
      status.code = kExitUsage;
      return;
    }
    auto workspace = chosen_workspace(cp->workspace, sfs::current_path());
    if (!workspace) {
      report(workspace.error());
      status.code = kExitUsage;
      return;
    }
    cp->workspace = *workspace;
    run_command(status, [&] {
      SessionCommand command;
      command.pipelined_proof = true;
      command.link_arg = cp->link;
      command.body = [cp](Session& session) -> asio::awaitable<int> { co_return co_await cp_body(*cp, session); };
      return run_session_command(command);
    });
  });
}

}  // namespace runsnack::cli
