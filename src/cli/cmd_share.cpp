// `runsnack share`: make a link and serve it until Ctrl-C.
#include "cli/command.hpp"
#include "cli/qr.hpp"
#include "cli/state.hpp"
#include "core/duration.hpp"
#include "crypto/secret.hpp"
#include "gpu/gpu_info.hpp"
#include "provider/provider.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <unistd.h>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

struct ShareArgs {
  std::string gpus;
  std::string expires;
  std::int64_t max_uses = 0;
  std::int64_t max_sessions = 0;
  bool bind_first = false;
  std::string port_range;
  std::string listen = "0.0.0.0";
  std::string label;
  std::string allow;
  bool serve_only = false;
  bool json = false;
  bool no_qr = false;
};

// The default ports, so that a provider restarted with the same settings
// serves its earlier links at the same address.
constexpr PortRange kDefaultPorts{7443, 7463};

Result<std::vector<int>> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  if (text.empty() || text == "all") return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    try {
      std::size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v < 0 || v > 63) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return fail(errc::invalid_argument, "bad --gpu list '" + text + "': expected e.g. 0 or 0,1 or all");
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

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

int share(const ShareArgs& args) {
  auto gpus = parse_gpu_list(args.gpus);
  if (!gpus) return report(gpus.error());
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

  auto identity = open_identity();
  if (!identity) return report(identity.error());
  auto db = open_database();
  if (!db) return report(db.error());

  asio::io_context io(1);
  Provider provider(io.get_executor(), *identity, *db, options, default_services(), [&](const nlohmann::json& ev) {
    if (args.json) {
      print_json(ev);
    } else if (ev["event"] == "session_open") {
      std::cerr << "\r\033[K+ session " << ev["session"].get<std::string>() << " from "
                << ev["peer"].get<std::string>().substr(0, 12) << " (" << ev["address"].get<std::string>() << ")\n";
    } else if (ev["event"] == "session_closed") {
      std::cerr << "\r\033[K- session " << ev["session"].get<std::string>() << " ended: "
                << ev["reason"].get<std::string>() << "\n";
    } else if (ev["event"] == "refused") {
      std::cerr << "\r\033[K! refused " << ev["address"].get<std::string>() << ": " << ev["reason"].get<std::string>()
                << "\n";
    }
  });
  if (auto r = provider.listen(); !r) return report(r.error());

  nlohmann::json ready = {{"event", "ready"}, {"peer", identity->peer_id().str()},
                          {"listen", provider.local_endpoint().address().to_string() + ":" +
                                         std::to_string(provider.local_endpoint().port())}};
  if (!args.serve_only) {
    Grant grant;
    grant.id = new_grant_id();
    std::string secret = new_secret();
    grant.key = derive_grant_key(secret);
    grant.created = std::chrono::system_clock::now();
    if (!args.expires.empty()) {
      auto d = parse_duration(args.expires);
      if (!d) return report(d.error());
      // Stored in whole seconds: round up, so a link never dies early.
      grant.expires = std::chrono::ceil<std::chrono::seconds>(grant.created + *d);
    }
    if (args.max_uses > 0) grant.max_uses = args.max_uses;
    if (args.max_sessions > 0) grant.max_sessions = args.max_sessions;
    auto services = parse_service_list(args.allow);
    if (!services) return report(services.error());
    grant.services = *services;
    grant.gpus = *gpus;
    grant.bind_first = args.bind_first;
    grant.label = args.label;
    GrantStore grants(*db);
    if (auto r = grants.create(grant); !r) return report(r.error());

    Link link;
    link.candidates = provider.candidates();
    link.provider = identity->peer_id();
    link.grant_id = grant.id;
    link.secret = secret;
    std::string text = format_link(link);
    ready["link"] = text;
    ready["grant"] = grant.id;
    ready["expires"] = grant.expires ? nlohmann::json(rfc3339(*grant.expires)) : nlohmann::json(nullptr);
    if (!args.json) {
      std::cout << text << std::endl;
      if (isatty(STDOUT_FILENO) && !args.no_qr) std::cout << render_qr(text);
      std::cerr << "Sharing as " << identity->peer_id().str() << " on port " << provider.local_endpoint().port()
                << " (link " << grant.id
                << (grant.expires ? ", expires " + rfc3339(*grant.expires) : std::string(", no expiry"))
                << "). Give the link above to the consumer; Ctrl-C stops sharing." << std::endl;
    }
  } else if (!args.json) {
    std::cerr << "Serving existing links as " << identity->peer_id().str() << " on port "
              << provider.local_endpoint().port() << ". Ctrl-C stops." << std::endl;
  }
  if (args.json) print_json(ready);

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) provider.stop();
  });
  asio::co_spawn(io, provider.run(), [&](std::exception_ptr e) {
    signals.cancel();
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        spdlog::error("provider: {}", ex.what());
      }
    }
  });

  // The live status line, only for a person watching a terminal.
  asio::steady_timer status_timer(io);
  bool show_status = !args.json && isatty(STDERR_FILENO);
  std::function<void()> tick = [&] {
    status_timer.expires_after(std::chrono::seconds(1));
    status_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      std::cerr << "\r\033[K" << status_line(provider.stats(), *gpus) << std::flush;
      tick();
    });
  };
  if (show_status) tick();
  signals.async_wait([&](const boost::system::error_code&, int) { status_timer.cancel(); });

  io.run();
  if (show_status) std::cerr << "\r\033[K";
  if (!args.json) std::cerr << "stopped sharing; links stay valid for the next `runsnack share --serve-only`" << std::endl;
  return 0;
}

}  // namespace

void add_share_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<ShareArgs>();
  auto* cmd = app.add_subcommand("share", "Share this machine: print a link and serve it until Ctrl-C");
  cmd->add_option("--gpu", args->gpus, "GPUs the link may use: 0 or 0,1 (default: all)");
  cmd->add_option("--expires", args->expires, "The link dies after this long: 30m, 2h, 1d (default: never)");
  cmd->add_option("--max-uses", args->max_uses, "Connections the link allows in total (default: unlimited)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-sessions", args->max_sessions, "Sessions open at once (default: unlimited)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--bind-first", args->bind_first, "Only the first consumer who uses the link may use it again");
  cmd->add_option("--port-range", args->port_range, "Listen on the first free port in A-B (default 7443-7463)");
  cmd->add_option("--listen", args->listen, "Address to listen on, ADDR or ADDR:PORT (default 0.0.0.0)");
  cmd->add_option("--allow", args->allow, "Services the link allows besides info, e.g. run,shell,cp,forward");
  cmd->add_option("--label", args->label, "A note for yourself, shown by `runsnack links`");
  cmd->add_flag("--serve-only", args->serve_only, "Make no new link; serve the links made before");
  cmd->add_flag("--json", args->json, "Print one JSON event per line; the first is {\"event\":\"ready\",\"link\":...}");
  cmd->add_flag("--no-qr", args->no_qr, "Do not draw the QR code");
  cmd->footer(
      "Every running `runsnack share` serves all of this machine's live links, so a restarted provider\n"
      "keeps earlier links working (same listen address and port). Revoke a link with `runsnack revoke`.\n"
      "The link is a credential: send it privately; it carries a secret that never reaches any server.");
  cmd->callback([&status, args] { run_command(status, [&] { return share(*args); }); });
}

}  // namespace runsnack::cli
