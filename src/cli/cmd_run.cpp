// `runsnack run`: sync the working folder, run a command in the provider's
// sandbox with its output streamed back, pull results (services/exec/exec_service.hpp
// has the protocol). Registers `shell` (cmd_shell.cpp) and `cp` (cmd_cp.cpp) too.
#include "cli/cmd_cp.hpp"
#include "cli/cmd_shell.hpp"
#include "cli/command.hpp"
#include "cli/command_words.hpp"
#include "cli/link_arg.hpp"
#include "cli/run_input.hpp"
#include "cli/session_end.hpp"
#include "cli/session_runner.hpp"
#include "cli/transfers.hpp"
#include "cli/workspace_arg.hpp"
#include "core/duration.hpp"
#include "core/json_fields.hpp"
#include "core/paths.hpp"
#include "core/printable.hpp"
#include "services/exec/detached_commands.hpp"
#include "services/exec/exec_service.hpp"
#include "services/exec/usage_budget.hpp"
#include "sandbox/run_terms.hpp"
#include "fs/path_rules.hpp"
#include "fs/tree_scan.hpp"
#include "fs/transfer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>

namespace runsnack::cli {

namespace asio = boost::asio;
namespace sfs = std::filesystem;

namespace {

struct RunArgs {
  std::string link;
  std::vector<int> gpus;
  std::vector<std::string> env;
  bool no_sync = false;
  std::string sync_dir;
  std::string timeout;
  std::vector<std::string> pull;
  std::string max_pull;
  std::vector<std::string> command;
  bool json = false;
  bool no_stdin = false;
  std::string workspace;  // --workspace, then the one used (workspace_arg.hpp)
};

// The project defaults (.venv/, node_modules/, ...), then the folder's rule files, which may
// send one of them again ("!.venv/").
fs::IgnoreRules ignore_rules_for(const sfs::path& root) {
  fs::IgnoreRules rules;
  rules.add_project_defaults();
  for (const char* name : fs::kIgnoreRuleFiles) {
    std::ifstream in(root / name);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    rules.add_file_text(text.str());
  }
  return rules;
}

sfs::path cache_file_for(const sfs::path& root) {
  auto dir = state_dir();
  if (!dir) return {};
  sfs::create_directories(*dir / "sync-cache");
  std::string key = root.string();
  return *dir / "sync-cache" / (fs::sha256_hex(key.data(), key.size()).substr(0, 32) + ".hashes");
}

// The folder `run` syncs, its scan started before the session is set up, so that the walk
// (and any hashing) overlaps the connection.
struct SyncSource {
  sfs::path path;
  fs::UniqueFd root;
  fs::HashCache cache;
  sfs::path cache_file;
  fs::IgnoreRules rules;
  fs::ScanReport report;  // what the scan left out, said once it is done
  ScanJob scan;  // not valid with --no-sync
};

// Ctrl-C: the first is SIGINT to the remote command, the second SIGKILL.
asio::awaitable<void> forward_signals(std::shared_ptr<RunInput> input, std::shared_ptr<asio::signal_set> signals) {
  int count = 0;
  for (;;) {
    auto [ec, sig] = co_await signals->async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    ++count;
    int remote = (count == 1 && sig == SIGINT) ? SIGINT : SIGKILL;
    std::fprintf(stderr, remote == SIGINT ? "\nrunsnack: interrupting the remote command (Ctrl-C again kills it)\n"
                                          : "\nrunsnack: killing the remote command\n");
    input->signal(remote);
  }
}

// One JSON line on stderr (run's stdout is the command's).
void print_json_line(const nlohmann::json& j) {
  std::cerr << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

// What the command left changed in the workspace (the exit message's "changed", services/exec/workspace_changes.hpp),
// said when nothing was pulled: it stays there otherwise. A few paths named, the rest counted.
void print_remote_changes(const nlohmann::json& changed) {
  constexpr std::size_t kNamed = 5;
  const auto files = int_or(changed, "files", 0);
  if (files <= 0) return;
  std::vector<std::string> paths;
  for (const auto& p : field_or(changed, "paths", nlohmann::json::array()))
    if (p.is_string()) paths.push_back(printable(p.get<std::string>()));
  const std::size_t named = std::min(paths.size(), kNamed);
  std::string names;
  for (std::size_t i = 0; i < named; ++i) names += (i ? ", " : "") + paths[i];
  if (named > 0 && static_cast<std::int64_t>(named) < files) names += ", ...";
  std::cerr << "runsnack: " << (bool_or(changed, "complete", true) ? "" : "at least ") << files
            << (files == 1 ? " file" : " files") << " changed in the remote workspace"
            << (names.empty() ? "" : " (" + names + ")")
            << " and stay there: add --pull PATH to bring them here, or `runsnack cp LINK remote:PATH .`" << std::endl;
}

void write_all(int fd, const std::vector<std::uint8_t>& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// What a run keeps across sessions: the running command's token and how much of its output arrived.
struct AttachState {
  std::string token;
  std::uint64_t out_bytes = 0, err_bytes = 0;
  // stdin, when it was forwarded: it does not follow a re-attach (the command reads its end there).
  bool stdin_forwarded = false, stdin_ended = false;
  std::uint64_t stdin_sent = 0;
};

asio::awaitable<int> run_body(const RunArgs& args, SyncSource& source, AttachState& attach, Session& session) {
  if (source.scan.valid()) {
    // Opened before waiting for the scan: the provider checks its copy of the workspace meanwhile.
    const nlohmann::json sync_args = in_workspace({{"mode", "sync"}}, args.workspace);
    auto sync_stream = co_await open_mode(session, exec::kServiceRun, sync_args);
    if (!sync_stream) co_return report(Error(sync_stream.error().code, "sync failed: " + sync_stream.error().what()));
    auto entries = co_await scan_result(source.scan);
    if (!entries) co_return report(entries.error());
    print_skipped("sync", source.report);
    source.cache.retain(*entries);
    source.cache.save(source.cache_file);
    const fs::Progress bar = progress_bar("sync");
    auto stats = co_await fs::send_tree(**sync_stream, source.root.get(), *entries, bar, {}, &source.cache);
    (void)co_await (*sync_stream)->close_write();
    if (!stats) co_return report(Error(stats.error().code, "sync failed: " + stats.error().what()));
    if (stats->files_sent > 0)
      std::cerr << "sync: " << stats->files_sent << " of " << stats->entries << " entries sent to workspace "
                << args.workspace << ", " << human(stats->bytes) << " (" << human(stats->wire_bytes) << " on the wire)"
                << std::endl;
    if (stats->files_sent > 0) print_defaulted("sync", source.report);
    if (stats->deleted > 0)
      std::cerr << "sync: " << stats->deleted << " deleted in workspace " << args.workspace << std::endl;
    if (args.json) {
      nlohmann::json line = stats_json("sync", *stats);
      line["workspace"] = args.workspace;
      std::cerr << line.dump() << std::endl;
    }
  }

  // stdin goes to the command unless it is a terminal (which stays the user's: Ctrl-C) or --no-stdin.
  const bool reattach = !attach.token.empty();
  const bool forward_stdin = !reattach && RunInput::stdin_wanted(args.no_stdin);
  nlohmann::json req = {{"type", "exec"}, {"argv", args.command}};
  if (forward_stdin) req["stdin"] = true;
  nlohmann::json env = nlohmann::json::object();
  for (const auto& kv : args.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) co_return report("bad --env '" + kv + "': expected KEY=VALUE");
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  req["env"] = env;
  if (!args.gpus.empty()) req["gpus"] = args.gpus;
  if (!args.timeout.empty()) {
    auto d = parse_duration(args.timeout);
    if (!d) co_return report(d.error());
    req["timeout_s"] = std::chrono::duration<double>(*d).count();
  }
  // A session that went silent under a running command: the provider keeps the command for a
  // while (services/exec/detached_commands.hpp); a new session re-attaches to it.
  const nlohmann::json exec_args = reattach ? nlohmann::json{{"mode", "attach"}, {"token", attach.token},
                                                             {"out", attach.out_bytes}, {"err", attach.err_bytes}}
                                            : in_workspace({{"mode", "exec"}}, args.workspace);
  // The request travels with the stream's header: the provider's answer and the command's first
  // output come back one round trip after the open.
  // (Named, not temporaries in the co_await expressions: GCC 12 destroys those twice.)
  const StreamHeader exec_header{exec::kServiceRun, exec_args};
  auto stream = co_await session.open_pipelined(exec_header);
  if (!stream) co_return report(stream.error());
  Result<void> sent{};
  if (!reattach) sent = co_await fs::write_control(**stream, req);
  auto answer = co_await session.answer(**stream, exec_header.service);
  if (!answer) co_return report(answer.error());
  if (!sent) co_return report(sent.error());

  // This stream's one writer: signals and stdin (run_input.hpp); it ends with the command.
  const auto executor = co_await asio::this_coro::executor;
  auto input = RunInput::create(*stream, forward_stdin);
  if (forward_stdin) attach.stdin_forwarded = true;
  auto end_input = [&] {
    input->stop();
    if (!forward_stdin) return;
    attach.stdin_sent = input->stdin_sent();
    attach.stdin_ended = input->stdin_ended();
  };
  asio::co_spawn(executor, input->run(), asio::detached);
  auto signals = std::make_shared<asio::signal_set>(executor, SIGINT, SIGTERM);
  asio::co_spawn(executor, forward_signals(input, signals), asio::detached);
  int status = -1;
  std::string failure;
  std::string exit_reason;                // why the provider stopped the command ("" when it ended by itself)
  std::optional<nlohmann::json> changed;  // from the exit message (an older provider sends none)
  std::string stop_reason, stop_notice;    // why the provider stopped it (a limit, a budget), what it saw on the way
  for (;;) {
    auto f = co_await fs::read_frame(**stream);
    if (!f) {
      // Lost with no word from the provider (silence, or a connection cut or ended without its
      // goodbye, GoAway or close_notify: Mux::lost): a fault, not an end. The provider keeps the
      // command (services/exec/detached_commands.hpp) and a new session re-attaches to it; only
      // an end the provider said (or its refusal of the new session) is final.
      if (session.mux().lost() && !session.goodbye() && !attach.token.empty()) {
        signals->cancel();
        end_input();
        const auto why = session.mux().close_reason();
        std::cerr << "runsnack: the session dropped ("
                  << (why ? why->what() : std::string("no reason")) << "); the remote command keeps running, "
                  << "re-attaching..." << std::endl;
        co_return kReconnect;
      }
      if (session.mux().is_closed() && args.json) print_json_line(session_end_json(session));
      failure = session.mux().is_closed() ? session_end_text(session) : f.error().what();
      break;
    }
    if (f->type == fs::FrameType::out) {
      write_all(STDOUT_FILENO, f->payload);
      attach.out_bytes += f->payload.size();
    } else if (f->type == fs::FrameType::err) {
      write_all(STDERR_FILENO, f->payload);
      attach.err_bytes += f->payload.size();
    } else if (f->type == fs::FrameType::control) {
      auto j = fs::decode_control(f->payload);
      if (!j) continue;
      if ((*j)["type"] == "started") attach.token = string_or(*j, "token");
      if ((*j)["type"] == "stdin_window") input->grant(static_cast<std::uint64_t>(std::max<std::int64_t>(0, int_or(*j, "bytes", 0))));
      if ((*j)["type"] == "stdin_closed") {
        input->stdin_closed();
        const auto received = static_cast<std::uint64_t>(std::max<std::int64_t>(0, int_or(*j, "received", 0)));
        if (string_or(*j, "why") == "reattach" && attach.stdin_forwarded &&
            (!attach.stdin_ended || received < attach.stdin_sent))
          std::cerr << "runsnack: stdin does not follow a re-attach: the remote command read the end of its input "
                    << "after " << received << " bytes" << std::endl;
      }
      if ((*j)["type"] == "attached") {
        const auto lost = int_or(*j, "lost_out", 0) + int_or(*j, "lost_err", 0);
        std::cerr << "runsnack: re-attached to the remote command";
        if (lost > 0) std::cerr << " (" << lost << " bytes of its output were lost)";
        std::cerr << std::endl;
      }
      if ((*j)["type"] == "error") {
        failure = string_or(*j, "message", "the provider refused");
        break;
      }
      if ((*j)["type"] == "exit") {
        status = int_or(*j, "status", 1);
        std::string reason = string_or(*j, "reason");
        exit_reason = reason;
        if (reason.starts_with("the command was stopped") || reason.starts_with("out of memory") ||
            reason.starts_with("the process limit") || reason.starts_with(exec::kBudgetSpent))
          std::cerr << "runsnack: " << printable(reason) << std::endl;
        else if (!reason.empty()) std::cerr << "runsnack: remote command stopped: " << printable(reason) << std::endl;
        // A command the provider could not start (not found: 127; not executable: 126), in one line.
        const std::string message = string_or(*j, "message");
        if (!message.empty()) std::cerr << "runsnack: " << printable(message) << std::endl;
        const std::string notice = string_or(*j, "notice");
        if (!notice.empty()) std::cerr << "runsnack: " << printable(notice) << std::endl;
        stop_reason = reason, stop_notice = notice;
        if (j->contains("changed") && (*j)["changed"].is_object()) changed = (*j)["changed"];
        break;
      }
    }
  }
  signals->cancel();
  end_input();
  (void)co_await (*stream)->close_write();
  if (status < 0) co_return report(failure);

  if (!args.pull.empty()) {
    auto limits = pull_limits(args.max_pull);
    if (!limits) co_return report(limits.error());
    const nlohmann::json pull_args = in_workspace({{"mode", "pull"}, {"paths", args.pull}}, args.workspace);
    limits->asked = args.pull;  // nothing else may land in this folder
    auto stats = co_await download(session, exec::kServiceRun, pull_args, source.root.get(), *limits);
    if (!stats) co_return report(Error(stats.error().code, "pull failed: " + stats.error().what()));
  }
  if (args.json) {
    nlohmann::json line = {{"event", "exit"}, {"status", status}};
    if (!exit_reason.empty()) line["reason"] = exit_reason;
    if (changed) line["changed"] = *changed;
    if (!stop_reason.empty()) line["reason"] = stop_reason;
    if (!stop_notice.empty()) line["notice"] = stop_notice;
    print_json_line(line);
  } else if (args.pull.empty() && changed) {
    print_remote_changes(*changed);
  }
  co_return status;
}

// --pull PATH: relative to the workspace and to this folder alike; "out/" is "out". Checked
// before the command runs, not after.
int check_pull_paths(std::vector<std::string>& paths) {
  for (auto& p : paths) {
    p = without_trailing_slashes(p);
    if (auto parts = fs::split_relative_path(p); !parts) {
      report("--pull " + parts.error().what() + " (give a path inside the workspace, e.g. --pull out/)");
      return kExitUsage;
    }
  }
  return 0;
}

int run(RunArgs& args) {
  if (args.command.empty()) return report("nothing to run: give the command after --, e.g. runsnack run LINK -- python train.py");
  if (int bad = check_pull_paths(args.pull)) return bad;
  SyncSource source;
  source.path = args.sync_dir.empty() ? sfs::current_path() : sfs::absolute(args.sync_dir);
  auto root = fs::open_root(source.path, false);
  if (!root) return report(root.error());
  auto workspace = chosen_workspace(args.workspace, source.path);
  if (!workspace) return report(workspace.error());
  args.workspace = *workspace;
  source.root = std::move(*root);
  SessionCommand command;
  command.pipelined_proof = true;
  command.link_arg = args.link;
  if (!args.no_sync)
    command.before_connect = [&source] {
      source.scan = std::async(std::launch::async, [&source] {
        source.cache_file = cache_file_for(source.path);
        source.cache.load(source.cache_file);
        source.rules = ignore_rules_for(source.path);
        return fs::scan_tree(source.root.get(), "", source.rules, &source.cache, std::nullopt, nullptr, &source.report);
      });
    };
  AttachState attach;
  command.reconnect_for = exec::kReattachWithin;  // the provider keeps a command no longer
  command.body = [&args, &source, &attach](Session& session) -> asio::awaitable<int> {
    co_return co_await run_body(args, source, attach, session);
  };
  const int status = run_session_command(command);
  if (source.scan.valid()) source.scan.wait();  // it uses `source`, whatever became of the session
  return status;
}

}  // namespace

void add_run_commands(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Sync this folder to the provider and run a command there, sandboxed");
  cmd->add_option("LINK", args->link, kLinkHelp);
  cmd->add_option("--gpu", args->gpus, "GPU index to use (repeatable; default: all the link shares)")->allow_extra_args(false);
  cmd->add_option("--env", args->env, "KEY=VALUE for the remote command (repeatable)")->allow_extra_args(false);
  cmd->add_flag("--no-sync", args->no_sync, "Do not sync; run in the workspace as it is");
  add_workspace_option(cmd, args->workspace);
  cmd->add_option("--sync", args->sync_dir, "Sync this folder instead of the current one");
  cmd->add_option("--timeout", args->timeout, "Stop the command after this long: 30s, 10m, 2h");
  cmd->add_option("--pull", args->pull,
                  "Copy this workspace path back when the command ends, to the same path here (repeatable; a file or "
                  "folder at any depth: --pull out/ --pull logs/run1/metrics.csv)")
      ->allow_extra_args(false);
  cmd->add_option("--max-pull", args->max_pull,
                  "Refuse a pull that would write more file data than this here, e.g. 500M, 50G (default 10G; holes "
                  "of sparse files do not count)");
  cmd->add_flag("--json", args->json,
                "Also print JSON lines on stderr (stdout is the command's): the sync's counters, then "
                "{\"event\":\"exit\",\"status\":N,\"changed\":{\"files\":N,\"paths\":[...]}}, or "
                "{\"event\":\"session_ended\",\"ended\":\"kicked\"|\"revoked\"|\"expired\"|...} when the provider "
                "ended the session");
  cmd->add_flag("--no-stdin,-n", args->no_stdin,
                "Do not send stdin: the command reads an empty input (as ssh -n; for a run inside a loop that reads "
                "the loop's input)");
  cmd->add_option("CMD", args->command, "The command and its arguments, after -- (all words after -- are CMD)");
  cmd->footer("Exits with the remote command's status (128+N when killed by signal N). Ctrl-C interrupts the\n"
              "remote command; a second Ctrl-C kills it. stdin reaches the command when it is not a terminal\n"
              "(echo x | runsnack run LINK -- cat prints x; its end is the command's end of input), as with ssh\n"
              "and docker run -i; a terminal stays yours (the command reads an empty input), as does --no-stdin.\n"
              "A connection lost under the command (an outage longer than ~11 s, whichever side noticed it\n"
              "first, or a connection that ended without the provider saying why) is not its end: run makes a\n"
              "new session and re-attaches to the command, which the provider keeps for 120 s, and its output\n"
              "goes on from where it stopped. Only an end the provider says (or its refusal) is final.\n"
              ".gitignore and .runsnackignore rules apply to the sync; .venv/, venv/, __pycache__/ and\n"
              "node_modules/ stay here by default (one line says so; a \"!.venv/\" line in .runsnackignore sends\n"
              "one), and so does .git/. Symlinks travel as symlinks, also those that point outside the folder\n"
              "(.venv/bin/python3 -> /usr/bin/python3 resolves in the sandbox); FIFOs, sockets, devices,\n"
              "unreadable files and symlink loops are left out, named in one line (sync: skipped ...).\n"
              "The command runs in the provider's sandbox: an unprivileged user of its own, no capabilities, a\n"
              "seccomp filter, the workspace as its only writable folder besides /tmp and /dev/shm (both count\n"
              "against the provider's --memory). --timeout and the provider's --run-timeout stop it on time\n"
              "whether or not its output is being read. --pull keeps the workspace path under this folder\n"
              "(--pull out/sub/f.txt writes ./out/sub/f.txt); a path with .. or a symlink on its way that leads\n"
              "out of the workspace is refused (and logged by the provider), and so is a pulled symlink that\n"
              "resolves outside this folder (through other symlinks too).\n"
              "What the command writes stays in the workspace unless --pull copies it here: without --pull, one\n"
              "line at the end names the files it changed there (runsnack: 3 files changed in the remote\n"
              "workspace (out.csv, ...)); runsnack cp LINK remote:PATH . fetches them later.\n"
              "When the provider ends the session (kick, revoke, expiry, share stopped), one line says which\n"
              "and what to do next, e.g. runsnack: the provider ended this session (link revoked); ask the\n"
              "provider for a new link.\n"
              "Each project folder has a workspace of its own on the provider (named after the folder, e.g.\n"
              "train-3f9a2c41): a sync deletes only in that one. --workspace NAME picks another; runsnack\n"
              "workspaces LINK lists yours, with their sizes.\n"
              "With RUNSNACK_LINK set, leave LINK out: runsnack run -- python train.py");
  cmd->callback([&status, args] {
    take_command(args->command, "runsnack run [LINK] -- CMD [ARGS...]");
    run_command(status, [&] { return run(*args); });
  });

  add_shell_command(app, status);

  add_cp_command(app, status);
}

}  // namespace runsnack::cli
