// `runsnack info LINK` (the provider's machine and the path to it) and
// `runsnack gpus` (this machine's GPUs, as a provider would share them).
#include "cli/command.hpp"
#include "cli/link_arg.hpp"
#include "cli/session_end.hpp"
#include "cli/session_runner.hpp"
#include "core/json_fields.hpp"
#include "core/printable.hpp"
#include "gpu/gpu_info.hpp"
#include "gpu/host_info.hpp"
#include "gpu/info_json.hpp"
#include "services/info_service.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <iostream>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

std::string gib(const nlohmann::json& bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes.is_number() ? bytes.get<double>() / (1024.0 * 1024 * 1024) : 0.0);
  return buf;
}

// Every string below came from the provider: shown with control characters escaped.
std::string text(const nlohmann::json& j, const char* key, const char* fallback = "?") {
  return printable(string_or(j, key, fallback));
}

void print_gpus(const nlohmann::json& gpus, const std::string& note) {
  if (gpus.empty()) {
    std::cout << "gpus      " << printable(note) << std::endl;
    return;
  }
  for (const auto& g : gpus) {
    std::cout << "gpu " << int_or(g, "index", 0) << "     " << text(g, "name") << " | "
              << gib(field_or(g, "memory_total", 0)) << " (" << gib(field_or(g, "memory_used", 0)) << " used) | "
              << int_or(g, "utilization_pct", 0) << "% busy | " << int_or(g, "temperature_c", 0) << " C | driver "
              << text(g, "driver_version") << " | CUDA " << text(g, "cuda_version") << " | " << text(g, "uuid")
              << std::endl;
  }
}

void print_host(const nlohmann::json& h) {
  std::cout << "host      " << text(h, "hostname") << " | " << text(h, "os") << " | " << int_or(h, "cpu_count", 0)
            << " x " << text(h, "cpu_model") << " | " << gib(field_or(h, "ram_total", 0)) << " RAM ("
            << gib(field_or(h, "ram_available", 0)) << " free)" << std::endl;
}

void print_info(const nlohmann::json& info) {
  char buf[160];
  std::cout << "provider  " << info["provider"].get<std::string>() << std::endl;
  print_host(info["host"]);
  print_gpus(info["gpus"], string_or(info, "gpu_note"));
  const auto& g = info["grant"];
  std::string services;
  for (const auto& s : field_or(g, "services", nlohmann::json::array()))
    if (s.is_string()) services += (services.empty() ? "" : ",") + printable(s.get<std::string>());
  auto opt = [&g](const char* key, const char* none) {
    auto v = field_or(g, key, nullptr);
    return v.is_number_integer() ? std::to_string(v.get<std::int64_t>()) : std::string(none);
  };
  std::string left = opt("uses_left", "");
  std::cout << "link      " << text(g, "id") << " | expires " << text(g, "expires", "never") << " | consumers "
            << int_or(g, "uses", 0) << "/" << opt("max_uses", "unlimited") << (left.empty() ? "" : " (" + left + " left)")
            << " | sessions at once "
            << opt("max_sessions", "unlimited") << " | allows " << services << std::endl;
  if (auto label = string_or(g, "label"); !label.empty()) std::cout << "label     " << printable(label) << std::endl;
  std::snprintf(buf, sizeof buf, "%s via %s | setup %.1f ms | rtt %.2f ms | bandwidth %.0f Mbit/s",
                info["path"].get<std::string>().c_str(), info["address"].get<std::string>().c_str(),
                info["setup_ms"].get<double>(), info["rtt_ms"].get<double>(), info["bandwidth_mbps"].get<double>());
  std::cout << "path      " << buf << std::endl;
  if (info.contains("cuda")) {
    const auto& c = info["cuda"];
    std::cout << "cuda      " << (bool_or(c, "available", false) ? "available: " : "not available: ")
              << text(c, "note", "") << " (runsnack cuda LINK -- CMD)" << std::endl;
  }
}

struct InfoArgs {
  std::string link;
  bool json = false;
  double timeout_s = 10;
  double watch_s = 0;  // 0: once
  std::uint64_t probe_bytes = 0;  // tests and benchmarks: move this many bytes and report their SHA-256
};

int info(const InfoArgs& args) {
  SessionCommand command;
  command.link_arg = args.link;
  command.connect_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.timeout_s * 1000));
  const auto started = std::chrono::steady_clock::now();
  command.body = [&args, started](Session& session) -> asio::awaitable<int> {
    // A session that ended under us (kicked, revoked, expired, provider gone) reads better than the
    // stream error it caused; --json says why in a last object.
    auto ended = [&](Error error) {
      if (args.json && session.mux().is_closed()) print_json(session_end_json(session));
      return report(explain_session_end(session, std::move(error)));
    };
    if (args.probe_bytes > 0) {
      auto t = co_await fetch_probe_bytes(session, args.probe_bytes);
      if (!t) co_return ended(t.error());
      double since_start =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count() -
          t->seconds * 1000;
      print_json({{"path", session.info().path},
                  {"address", session.info().remote_address},
                  {"setup_ms", static_cast<double>(session.info().setup.count()) / 1000},
                  {"probe_bytes", t->bytes},
                  {"sha256", t->sha256},
                  {"first_byte_ms", since_start},
                  {"mbps", t->seconds > 0 ? static_cast<double>(t->bytes) * 8 / t->seconds / 1e6 : 0.0}});
      co_return 0;
    }
    // The bandwidth is measured once: every refresh of --watch shows the first measurement.
    std::optional<double> bandwidth;
    for (;;) {
      InfoOptions options;
      options.bandwidth = !bandwidth;
      auto result = co_await fetch_info(session, options);
      if (!result) co_return ended(result.error());
      if (!bandwidth) bandwidth = number_or(*result, "bandwidth_mbps", 0.0);
      (*result)["bandwidth_mbps"] = *bandwidth;
      if (args.json) print_json(*result);
      else print_info(*result);
      if (args.watch_s <= 0) co_return 0;
      if (!args.json) std::cout << std::endl;
      // Sleep in short steps so that a session the provider ends is reported at once.
      auto until = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<std::int64_t>(args.watch_s * 1000));
      asio::steady_timer pause(co_await asio::this_coro::executor);
      while (std::chrono::steady_clock::now() < until && !session.mux().is_closed()) {
        pause.expires_after(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(50),
                                                                         until - std::chrono::steady_clock::now()));
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      if (session.mux().is_closed()) co_return ended(Error(errc::closed, "session closed"));
    }
  };
  return run_session_command(command);
}

}  // namespace

void add_info_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<InfoArgs>();
  auto* cmd = app.add_subcommand("info", "Show the provider's machine, GPUs, link terms, and the path's RTT and bandwidth");
  cmd->add_option("LINK", args->link, kLinkHelp);
  cmd->add_flag("--json", args->json,
                "One JSON object with keys host, gpus, grant, provider, path, setup_ms, rtt_ms, bandwidth_mbps");
  cmd->add_option("--timeout", args->timeout_s, "Seconds to wait for the provider")->capture_default_str();
  cmd->add_option("--watch", args->watch_s, "Keep the session open and report again every this many seconds (the bandwidth is "
                  "measured once, at the start: at most 16 MiB in 0.3 s)");
  cmd->add_option("--probe-bytes", args->probe_bytes,
                  "Test the path: receive N bytes through the session, print their SHA-256 and timing as JSON");
  cmd->callback([&status, args] { run_command(status, [&] { return info(*args); }); });
}

void add_gpus_command(CLI::App& app, ExitStatus& status) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("gpus", "Show this machine's GPUs (what `runsnack share` can offer)");
  cmd->add_flag("--json", *json, "One JSON object with keys host, gpus, gpu_note, driver_version, cuda_version");
  cmd->callback([&status, json] {
    run_command(status, [&] {
      GpuReport report = query_gpus({});
      nlohmann::json gpus = gpu_list_json(report);
      std::string note = gpu_note(report, "this machine");
      if (*json) {
        print_json({{"host", query_host()}, {"gpus", gpus}, {"gpu_note", note},
                    {"driver_version", report.driver_version}, {"cuda_version", report.cuda_version}});
      } else {
        print_host(query_host());
        print_gpus(gpus, note);
      }
      return 0;
    });
  });
}

}  // namespace runsnack::cli
