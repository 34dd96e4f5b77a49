// `runsnack doctor [LINK]`: what works on this machine and on the path to a
// link, and what to do about what does not (doctor_checks.hpp,
// doctor_network.hpp). The local checks run first; the router, the
// rendezvous and the link are probed at the same time, each bounded.
#include "cli/command.hpp"
#include "cli/doctor_checks.hpp"
#include "cli/doctor_network.hpp"
#include "cli/share_link.hpp"
#include "core/paths.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>
#include <unistd.h>

namespace runsnack::cli {

namespace asio = boost::asio;
using doctor::Check;

namespace {

struct DoctorArgs {
  std::string link;
  bool json = false;
  std::string port_range = "7443-7463";
  std::string rendezvous;
  bool no_port_mapping = false;
  double timeout_s = 10;
};

// The rendezvous `share` would use: the flag, RUNSNACK_RENDEZVOUS, or config.json in the state share uses.
Result<std::string> configured_rendezvous(const std::string& flag) {
  auto share_state = choose_state_dir(StateScope::machine, StateEnvironment::current());
  if (!share_state) return std::string();
  return rendezvous_setting(flag, share_state->dir);
}

void print_human(const std::vector<Check>& checks) {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::cout << "runsnack " << kVersion << " on " << host << std::endl;
  int failed = 0, warned = 0;
  for (const auto& c : checks) {
    std::string status = c.status;
    status.resize(6, ' ');
    std::string name = c.name;
    if (name.size() < 18) name.resize(18, ' ');
    std::cout << status << name << c.detail << std::endl;
    if (!c.fix.empty()) std::cout << std::string(24, ' ') << "fix: " << c.fix << std::endl;
    failed += c.status == "fail";
    warned += c.status == "warn";
  }
  std::cout << (failed ? std::to_string(failed) + " failed, " : std::string()) << warned
            << (warned == 1 ? " warning" : " warnings") << (failed ? "" : ", nothing broken") << std::endl;
}

int run_doctor(const DoctorArgs& args) {
  auto range = parse_port_range(args.port_range);
  if (!range) return report(range.error());
  auto rendezvous_text = configured_rendezvous(args.rendezvous);
  std::optional<Endpoint> rendezvous;
  std::vector<Check> checks;
  if (!rendezvous_text) {
    checks.push_back({"nat", "fail", rendezvous_text.error().what(), "fix or remove the file"});
  } else if (!rendezvous_text->empty()) {
    auto ep = parse_endpoint(*rendezvous_text, "rendezvous");
    if (!ep) return report(ep.error());
    rendezvous = *ep;
  }

  checks.push_back(doctor::check_state());
  checks.push_back(doctor::check_service());
  checks.push_back(doctor::check_gpu());
  checks.push_back(doctor::check_cuda());
  for (auto& c : doctor::check_sandbox()) checks.push_back(std::move(c));
  checks.push_back(doctor::check_limits());
  checks.push_back(doctor::check_disk_quota());
  checks.push_back(doctor::check_fast_open());
  std::uint16_t port = 0;
  checks.push_back(doctor::check_ports(*range, port));

  // The slow ones, at once: the router in its thread, the rendezvous and the link on one io_context.
  std::future<Check> router;
  if (!args.no_port_mapping && port != 0) router = doctor::probe_router(port);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.timeout_s * 1000));
  std::optional<Check> nat, link;
  asio::io_context io(1);
  auto keep = [](std::optional<Check>& slot) {
    return [&slot](std::exception_ptr e, Check c) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          c = {"internal", "fail", ex.what(), ""};
        }
      }
      slot = std::move(c);
    };
  };
  if (rendezvous) asio::co_spawn(io, doctor::check_nat(*rendezvous, std::min(timeout, std::chrono::milliseconds(3000))), keep(nat));
  if (!args.link.empty()) asio::co_spawn(io, doctor::check_link(args.link, timeout), keep(link));
  io.run();

  if (router.valid()) checks.push_back(router.get());
  else checks.push_back({"router", "skip", args.no_port_mapping ? "not asked (--no-port-mapping)" : "no free port to map", ""});
  if (nat) checks.push_back(*nat);
  else if (!rendezvous)
    checks.push_back({"nat", "skip", "no rendezvous configured (share --rendezvous, RUNSNACK_RENDEZVOUS or config.json)",
                      "consumers behind another NAT need one: `runsnack rendezvous` on a reachable host"});
  if (link) checks.push_back(*link);

  bool failed = false;
  for (const auto& c : checks) failed |= c.status == "fail";
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : checks) list.push_back(doctor::to_json(c));
    print_json({{"version", kVersion}, {"ok", !failed}, {"checks", list}});
  } else {
    print_human(checks);
  }
  return failed ? kExitFailure : 0;
}

}  // namespace

void add_doctor_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand("doctor", "Check what works on this machine (and on the path to LINK) and how to fix the rest");
  cmd->add_option("LINK", args->link,
                  "Also connect to this link and report the path, RTT and bandwidth (a saved name, '-' for stdin)");
  cmd->add_flag("--json", args->json,
                "One JSON object {\"version\",\"ok\",\"checks\":[{\"name\",\"status\",\"detail\",\"fix\"}]}; status is "
                "ok, warn, fail or skip");
  cmd->add_option("--port-range", args->port_range, "Ports share would listen on")->capture_default_str();
  cmd->add_option("--rendezvous", args->rendezvous, "Check the NAT through this rendezvous (default: share's setting)");
  cmd->add_flag("--no-port-mapping", args->no_port_mapping, "Do not ask the router for a port mapping");
  cmd->add_option("--timeout", args->timeout_s, "Seconds to wait for LINK's provider")->capture_default_str();
  cmd->footer(
      "Checks: the state folders in use, runsnack-share.service (Debian package), the NVIDIA driver and\n"
      "NVML (WSL included), the CUDA driver and shim, bubblewrap and user namespaces (as root also as user\n"
      "runsnack), cgroup limits, whether --disk-quota is a filesystem (an ext4 image), free ports, the\n"
      "router's UPnP/NAT-PMP mapping (about 5 s without a router), the NAT as the rendezvous sees it, and\n"
      "for LINK the path, RTT and bandwidth. Exit status 1 when a check failed (warnings are limits, not\n"
      "failures).");
  cmd->callback([&status, args] { run_command(status, [&] { return run_doctor(*args); }); });
}

}  // namespace runsnack::cli
