// `runsnack share`: make a link and serve it until Ctrl-C.
#include "cli/command.hpp"
#include "cli/gpu_arg.hpp"
#include "cli/qr.hpp"
#include "cli/serving_notice.hpp"
#include "cli/share_link.hpp"
#include "cli/state.hpp"
#include "core/duration.hpp"
#include "core/printable.hpp"
#include "core/paths.hpp"
#include "crypto/secret.hpp"
#include "fs/read_bounds.hpp"
#include "gpu/gpu_info.hpp"
#include "provider/host.hpp"
#include "sandbox/cgroup.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/run_terms.hpp"
#include "sandbox/workspace_image.hpp"
#include "services/forward/forward_target.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <unistd.h>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

// The default ports, so that a provider restarted with the same settings
// serves its earlier links at the same address.
constexpr PortRange kDefaultPorts{7443, 7463};


// "ADDR", "ADDR:PORT", "[V6]" or "[V6]:PORT" -> address and optional port
// (0 meaning any free port).
Result<std::pair<std::string, std::optional<std::uint16_t>>> parse_listen(const std::string& text) {
  auto bad = [&] {
    return fail(errc::invalid_argument, "bad --listen '" + text + "': expected ADDR or ADDR:PORT, e.g. 0.0.0.0:7443");
  };
  std::string host = text;
  std::optional<std::uint16_t> port;
  std::size_t colon = text.rfind(':');
  bool bracketed = !text.empty() && text.front() == '[';
  if (bracketed) {
    std::size_t close = text.find(']');
    if (close == std::string::npos) return bad();
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return bad();
      colon = close + 1;
    } else {
      colon = std::string::npos;
    }
  } else if (colon != std::string::npos && text.find(':') != colon) {
    colon = std::string::npos;  // a bare IPv6 address
  } else if (colon != std::string::npos) {
    host = text.substr(0, colon);
  }
  if (colon != std::string::npos) {
    std::string digits = text.substr(colon + 1);
    if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) return bad();
    unsigned v = static_cast<unsigned>(std::stoul(digits));
    if (v > 65535) return bad();
    port = static_cast<std::uint16_t>(v);
  }
  if (host.empty()) return bad();
  return std::pair<std::string, std::optional<std::uint16_t>>{host, port};
}

std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string status_line(const ProviderStats& s, const std::vector<int>& gpus) {
  std::string line = std::to_string(s.sessions) + (s.sessions == 1 ? " session" : " sessions");
  GpuReport report = query_gpus(gpus);
  for (const auto& g : report.gpus) line += " | GPU " + std::to_string(g.index) + " " + std::to_string(g.utilization_pct) + "%";
  if (report.gpus.empty()) line += " | no GPU";
  line += " | in " + human_bytes(s.bytes_in) + " | out " + human_bytes(s.bytes_out);
  return line;
}
// --label: one line of at most kMaxLabelChars characters (it is printed by `links`, and by consumers with --public-label).
constexpr std::size_t kMaxLabelChars = 200;

Result<void> check_label(const std::string& label) {
  std::size_t chars = 0;
  for (unsigned char c : label) {
    if (c < 0x20 || c == 0x7f) return fail(errc::invalid_argument, "--label must be one line of text (no control characters)");
    chars += (c & 0xC0) != 0x80;
  }
  if (chars > kMaxLabelChars)
    return fail(errc::invalid_argument, "--label is " + std::to_string(chars) + " characters; at most " +
                                            std::to_string(kMaxLabelChars));
  if (printable(label) != label) return fail(errc::invalid_argument, "--label holds invisible or invalid characters");
  return {};
}

// --gpu: every index must be a GPU of this machine, or the link would promise what is not there.
Result<void> check_gpus_exist(const std::vector<int>& wanted) {
  if (wanted.empty()) return {};
  GpuReport report = query_gpus({});
  std::string have;
  for (const auto& g : report.gpus) have += (have.empty() ? "" : ", ") + std::to_string(g.index);
  for (int i : wanted) {
    bool found = std::any_of(report.gpus.begin(), report.gpus.end(), [i](const GpuInfo& g) { return g.index == i; });
    if (found) continue;
    if (report.gpus.empty())
      return fail(errc::invalid_argument, "--gpu " + std::to_string(i) + ": this machine has no NVIDIA GPU that RunSnack can see" +
                                              (report.note.empty() ? "" : " (" + report.note + ")") +
                                              "; share without --gpu (`runsnack doctor` checks the driver)");
    return fail(errc::invalid_argument, "--gpu " + std::to_string(i) + ": this machine has no GPU " + std::to_string(i) +
                                            " (it has GPU " + have + "; `runsnack gpus` lists them)");
  }
  return {};
}

// --memory where no cgroup holds it as the total of a command's processes (the trial group that
// prepare_limits would pass, Cgroup::probe_memory_total) binds each process alone: 952 MiB
// resident under --memory 200M (issue 37). Refused unless the provider accepts that; "" to go on.
std::string memory_limit_refusal(const ShareArgs& args) {
  if (args.memory.empty()) return "";
  auto total = exec::Cgroup::probe_memory_total();
  if (total) return "";
  const std::string why = "--memory " + args.memory +
                          " would bind each process of a command alone (RLIMIT_AS), not their total, and a CUDA "
                          "server not at all: no cgroup can hold it here (" + total.error().message + ")";
  if (!args.memory_per_process)
    return why + ". Run the provider as runsnack-share.service (the Debian package's unit delegates a cgroup)" +
           (::geteuid() == 0 ? " or mount cgroup v2 with the memory and pids controllers" : " or as root") +
           ", or add --memory-per-process to accept a limit per process";
  std::cerr << "runsnack: note: " << why << "; accepted by --memory-per-process.\n";
  return "";
}

int share(const ShareArgs& args) {
  if (auto ok = check_label(args.label); !ok) return report(ok.error());
  if (args.public_label && args.label.empty()) return report("--public-label needs a --label");
  if (std::string why; !args.disk_quota.empty() && !exec::image_mounter(&why))
    std::cerr << "runsnack: note: --disk-quota is measured every 250 ms here, not enforced by a filesystem, because "
              << why << ": a fast writer can pass it briefly before its command is stopped. Run share as root, or "
                        "make fuse2fs usable, for a hard total (each workspace its own ext4 image).\n";
  auto gpus = parse_gpu_list(args.gpus);
  if (!gpus) return report(gpus.error());
  if (auto ok = check_gpus_exist(*gpus); !ok) return report(ok.error());
  if (state_source() == StateSource::machine) return share_through_service(args, *gpus);
  // One provider per state (as `tailscale serve` and ngrok attach to their one agent): a share already
  // serving it makes this link, instead of another port whose link would die with this terminal.
  {
    auto dir = state_dir();
    if (!dir) return report(dir.error());
    auto serving = find_serving_share(*dir);
    if (!serving) return report(serving.error());
    if (*serving)
      return share_through(args, *gpus, **serving, "the share already running here (pid " +
                                                       std::to_string((*serving)->pid) + ")",
                           "stop it and start `runsnack share --serve-only` with them, or use another state: "
                           "RUNSNACK_HOME=DIR runsnack share ...");
  }
  if (std::string refusal = memory_limit_refusal(args); !refusal.empty()) return report(refusal);
  auto listen = parse_listen(args.listen);
  if (!listen) return report(listen.error());
  ProviderOptions options;
  options.listen_address = listen->first;
  options.ports = kDefaultPorts;
  if (!args.port_range.empty()) {
    auto range = parse_port_range(args.port_range);
    if (!range) return report(range.error());
    options.ports = *range;
  }
  if (listen->second) options.ports = {*listen->second, *listen->second};
  options.sessions = {args.total_sessions, args.sessions_per_address};

  auto identity = open_identity();
  if (!identity) return report(identity.error());
  auto db = open_database();
  if (!db) return report(db.error());

  asio::io_context io(1);
  // The status line's control codes only for a terminal; a log file gets plain lines.
  const bool show_status = !args.json && isatty(STDERR_FILENO);
  const char* clear_line = show_status ? "\r\033[K" : "";
  HostOptions host_options;
  host_options.provider = options;
  host_options.port_mapping = !args.no_port_mapping;
  {
    auto state = state_dir();
    if (!state) return report(state.error());
    auto setting = rendezvous_setting(args.rendezvous, *state);
    if (!setting) return report(setting.error());
    if (!setting->empty()) {
      auto ep = parse_endpoint(*setting, "rendezvous");
      if (!ep) return report(ep.error());
      host_options.rendezvous = *ep;
    }
  }
  const auto& rendezvous = host_options.rendezvous;
  HostEvents events;
  events.provider = [&](const nlohmann::json& ev) {
    if (args.json) {
      print_json(ev);
    } else if (ev["event"] == "session_open") {
      std::cerr << clear_line << "+ session " << ev["session"].get<std::string>() << " from "
                << ev["peer"].get<std::string>().substr(0, 12) << " (" << ev["address"].get<std::string>() << ")\n";
    } else if (ev["event"] == "session_closed") {
      std::cerr << clear_line << "- session " << ev["session"].get<std::string>() << " ended: "
                << ev["reason"].get<std::string>() << "\n";
    } else if (ev["event"] == "refused") {
      std::cerr << clear_line << "! refused " << ev["address"].get<std::string>() << ": " << ev["reason"].get<std::string>()
                << "\n";
    }
  };
  events.rendezvous = [json = args.json](const std::string& state) {
    if (json) print_json({{"event", "rendezvous"}, {"state", state}});
    else spdlog::info("rendezvous: {}", state);
  };
  events.not_mapped = [json = args.json](const std::string& why) {
    if (json) print_json({{"event", "port_mapping"}, {"mapped", false}, {"why", why}});
    else spdlog::debug("no port mapping: {}", why);
  };
  std::uint16_t port = 0;  // set once listening
  events.mapped = [&](const PortMapping& mapping) {
    const std::string external = mapping.external().str();
    if (args.json)
      print_json({{"event", "mapped"}, {"address", external}, {"protocol", mapping.protocol()}});
    else
      std::cerr << clear_line << "The router maps port " << port << " to " << external << " (" << mapping.protocol()
                << ")" << (rendezvous ? ": consumers outside find it through the rendezvous" : "") << std::endl;
  };
  ProviderHost host(io.get_executor(), *identity, *db, std::move(host_options), default_services(), std::move(events));
  if (auto r = host.listen(); !r) return report(r.error());
  port = host.local_endpoint().port();
  exec::prepare_spare();  // the first command starts as fast as the next ones
  // The link carries what is known at once (these addresses, the
  // rendezvous); the router's port mapping comes later, through the rendezvous.
  std::vector<Endpoint> candidates = host.candidates();

  // Caught from before "ready" is printed: a script that stops us right after it sees a clean exit.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  nlohmann::json ready = {{"event", "ready"}, {"peer", identity->peer_id().str()},
                          {"listen", host.local_endpoint().address().to_string() + ":" + std::to_string(port)}};
  // A later `share` of this state hands its links to this process (serving_notice.hpp), and
  // `links` says they are served here.
  std::optional<ServingNotice> notice;
  {
    auto dir = state_dir();
    if (!dir) return report(dir.error());
    auto published = ServingNotice::publish(*dir, {static_cast<long>(::getpid()), identity->peer_id(),
                                                   ready["listen"].get<std::string>(), candidates, rendezvous});
    if (!published) return report(published.error());
    notice.emplace(std::move(*published));
  }
  if (!args.serve_only) {
    auto made = create_grant(args, *gpus, *db);
    if (!made) return report(made.error());
    std::string text = host.link(made->grant.id, made->secret);
    announce_link(args, *made, text, ready);
    if (!args.json) {
      std::cerr << "Sharing as " << identity->peer_id().str() << " on port " << port
                << " (link " << made->grant.id << ", " << expiry_note(args, made->grant) << ", "
                << uses_note(made->grant) << "). Give the link above to the consumer; Ctrl-C stops sharing." << std::endl;
      for (const auto& t : made->forward.targets)
        std::cerr << "Exposing " << t.name << " -> " << t.address() << (t.host_header ? " (Host header rewritten)" : "")
                  << "; the consumer runs `runsnack forward LINK " << t.name << "`" << std::endl;
    }
  } else if (!args.json) {
    std::cerr << "Serving existing links as " << identity->peer_id().str() << " on port " << port << ". Ctrl-C stops."
              << std::endl;
  }
  if (args.json) print_json(ready);

  // The live status line, only for a person watching a terminal.
  asio::steady_timer status_timer(io);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    status_timer.cancel();
    if (ec) return;
    fs::stop_all_file_work();  // hashing or reading for a consumer ends at its next MiB, not at its file's end
    host.stop();
  });
  host.start([&] { signals.cancel(); });  // the provider ended: so does the wait for a signal
  std::function<void()> tick = [&] {
    status_timer.expires_after(std::chrono::seconds(1));
    status_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      std::cerr << "\r\033[K" << status_line(host.stats(), *gpus) << std::flush;
      tick();
    });
  };
  if (show_status) tick();

  io.run();
  if (show_status) std::cerr << "\r\033[K";
  if (!args.json) std::cerr << "stopped sharing; links stay valid for the next `runsnack share --serve-only`" << std::endl;
  return 0;
}

}  // namespace

// --max-uses: a whole number of consumers, 1 to kMaxUsesLimit. Said in words,
// where a number CLI11 would read otherwise ("1e3", or one past int64) is refused too.
const CLI::Validator kMaxUsesRange(
    [](std::string& text) -> std::string {
      const std::string range = "must be a whole number from 1 to " + std::to_string(kMaxUsesLimit) +
                                " (consumers: people, counted by their key)";
      if (text.empty() || text.size() > 7 || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return range;
      const std::int64_t n = std::stoll(text);
      return n >= 1 && n <= kMaxUsesLimit ? "" : range;
    },
    "1-" + std::to_string(kMaxUsesLimit), "CONSUMERS");

void add_share_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<ShareArgs>();
  auto* cmd = app.add_subcommand("share", "Share this machine: print a link and serve it until Ctrl-C");
  cmd->add_option("--gpu", args->gpus, "GPUs the link may use: 0 or 0,1 (default: all)");
  cmd->add_option("--expires", args->expires, "The link dies after this long: 30m, 2h, 1d, or never (default: 24h)");
  cmd->add_option("--max-uses", args->max_uses,
                  "Consumers (people, counted by their key) the link is for: the first N who use it may use it "
                  "again and again until it expires; the next is refused (1 to " + std::to_string(kMaxUsesLimit) +
                      "; default: any number). `runsnack links` shows how many are left")
      ->check(kMaxUsesRange);
  cmd->add_option("--max-sessions", args->max_sessions, "Sessions open at once (default: unlimited)")
      ->check(kPositiveNumber);
  cmd->add_option("--total-sessions", args->total_sessions,
                  "Sessions this provider holds open at once, over all links (default " +
                      std::to_string(SessionLimits{}.total) + ")")
      ->check(kPositiveNumber);
  cmd->add_option("--sessions-per-address", args->sessions_per_address,
                  "Sessions open at once from one IP address (an IPv6 /64), over all links; relayed ones count "
                  "only in --total-sessions (default " + std::to_string(SessionLimits{}.per_address) + ")")
      ->check(kPositiveNumber);
  cmd->add_flag("--bind-first", args->bind_first, "Only the first consumer who uses the link may use it again");
  cmd->add_option("--port-range", args->port_range, "Listen on the first free port in A-B (default 7443-7463)");
  cmd->add_option("--listen", args->listen, "Address to listen on, ADDR or ADDR:PORT (default 0.0.0.0)");
  cmd->add_option("--allow", args->allow, "Services the link allows besides info, e.g. run,shell,cp,forward,cuda (cuda: the consumer's "
                  "CUDA programs use this machine's GPUs, `runsnack cuda`)");
  cmd->add_option("--run-timeout", args->run_timeout, "run/cuda: wall-clock limit per command (cuda: per CUDA process), e.g. 10m (default: none)");
  cmd->add_option("--memory", args->memory,
                  "run/cuda: host memory limit per command or CUDA process, e.g. 4G; the sandbox's /tmp and /dev/shm "
                  "are bounded by it and count against it (default: none; /tmp then gets a quarter of the RAM). A "
                  "total of the command's processes in a cgroup; where none can be made, share refuses it unless "
                  "--memory-per-process");
  cmd->add_flag("--memory-per-process", args->memory_per_process,
                "Accept that --memory binds each process alone (RLIMIT_AS) and a CUDA process not at all, where no "
                "cgroup can hold it as a total (`runsnack doctor` says whether one can)");
  cmd->add_option("--max-procs", args->max_procs, "run/cuda: processes per command or CUDA process (default 1024)")->check(kPositiveNumber);
  cmd->add_option("--cpu-hours", args->cpu_hours, "run/shell: CPU time the link may use in total; spent, it expires")
      ->check(kNonNegativeNumber);
  cmd->add_option("--gpu-hours", args->gpu_hours, "run/shell: GPU time (wall time x GPUs) in total; spent, it expires")
      ->check(kNonNegativeNumber);
  cmd->add_option("--disk-quota", args->disk_quota,
                  "run/cp: the disk the link's workspaces may take, however they are filled, for everyone who uses the "
                  "link together, e.g. 10G (an ext4 image of that size per link; where none can be mounted, measured "
                  "while commands run) (default: none)");
  cmd->add_option("--max-transfer", args->max_transfer,
                  "run --pull / cp: file data one transfer from the workspace may send, e.g. 50G (default 10G; holes "
                  "of sparse files do not count)");
  cmd->add_flag("--network", args->network, "run: let commands reach the network (default: no network)");
  cmd->add_option("--expose", args->expose,
                  "Let the link reach a TCP service here: PORT (on 127.0.0.1), NAME=PORT or NAME=HOST:PORT; "
                  "add ,host-header to rewrite HTTP Host headers (repeatable)");
  cmd->add_flag("--ollama", args->ollama, "Expose the local Ollama (127.0.0.1:11434) with Host rewrite, as 'ollama'");
  cmd->add_option("--bandwidth", args->bandwidth, "Limit forwarded traffic per session: 10mbit, 1gbit, 5MB (bytes/s)");
  cmd->add_option("--max-connections", args->max_connections, "Forwarded connections open at once per session")
      ->check(kPositiveNumber);
  cmd->add_option("--label", args->label,
                  "A note for yourself (one line, at most 200 characters), shown by `runsnack links`; "
                  "consumers do not see it unless --public-label");
  cmd->add_flag("--public-label", args->public_label, "Show the --label to consumers too (in `runsnack info`)");
  cmd->add_flag("--serve-only", args->serve_only, "Make no new link; serve the links made before");
  cmd->add_flag("--json", args->json, "Print one JSON event per line; the first is {\"event\":\"ready\",\"link\":...}");
  cmd->add_flag("--no-qr", args->no_qr, "Do not draw the QR code");
  cmd->add_option("--rendezvous", args->rendezvous,
                  "HOST:PORT of a rendezvous, for consumers behind NAT (also RUNSNACK_RENDEZVOUS or config.json)");
  cmd->add_flag("--no-port-mapping", args->no_port_mapping, "Do not ask the router for a port mapping (UPnP/NAT-PMP)");
  cmd->footer(
      "One `runsnack share` serves all of this machine's live links: a second `share` while one runs makes\n"
      "its link on the running one (and ends at once; `links` says where links are served), and a\n"
      "restarted provider keeps earlier links working (same listen address and port). Revoke a link with\n"
      "`runsnack revoke`.\n"
      "Where the Debian package is installed, root and members of group runsnack share through\n"
      "runsnack-share.service: the link is made in /var/lib/runsnack and served by the service\n"
      "(unless RUNSNACK_HOME is set; docs/INSTALL.md).\n"
      "The link is a credential: send it privately; it carries a secret that never reaches any server.");
  cmd->callback([&status, args, cmd] {
    for (const char* name : {"--listen", "--port-range", "--rendezvous", "--no-port-mapping", "--total-sessions",
                             "--sessions-per-address"})
      if (cmd->count(name) > 0) args->service_sets += (args->service_sets.empty() ? "" : ", ") + std::string(name);
    run_command(status, [&] { return share(*args); });
  });
}

}  // namespace runsnack::cli
