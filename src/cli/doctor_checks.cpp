#include "cli/doctor_checks.hpp"

#include "cli/serving_notice.hpp"
#include "core/paths.hpp"
#include "cuda/shim_location.hpp"
#include "gpu/gpu_info.hpp"
#include "sandbox/cgroup.hpp"
#include "sandbox/sandbox.hpp"
#include "sandbox/workspace_image.hpp"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace runsnack::cli::doctor {

namespace fs = std::filesystem;

nlohmann::json to_json(const Check& c) {
  return {{"name", c.name}, {"status", c.status}, {"detail", c.detail}, {"fix", c.fix}};
}

namespace {

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

std::string source_name(StateSource s) {
  switch (s) {
    case StateSource::runsnack_home: return "$RUNSNACK_HOME";
    case StateSource::machine: return "the machine's state";
    case StateSource::xdg: return "$XDG_DATA_HOME/runsnack";
    case StateSource::home: return "~/.local/share/runsnack";
  }
  return "?";
}

}  // namespace

Check check_state() {
  Check c{"state", "ok", "", ""};
  auto env = StateEnvironment::current();
  auto mine = choose_state_dir(StateScope::user, env);
  auto links = choose_state_dir(StateScope::machine, env);
  if (!mine || !links) return {"state", "fail", mine ? links.error().what() : mine.error().what(), "set RUNSNACK_HOME or HOME"};
  if (links->dir == mine->dir) {
    c.detail = mine->dir.string() + " (" + source_name(mine->source) + ") for every command";
  } else {
    c.detail = "share, links, revoke, log, sessions and kick use " + links->dir.string() + " (" + source_name(links->source) +
               "); the other commands " + mine->dir.string();
  }
  std::error_code ec;
  if (fs::is_directory(kMachineStateDir, ec) && links->source != StateSource::machine &&
      links->source != StateSource::runsnack_home) {
    c.status = "warn";
    c.detail += "; " + std::string(kMachineStateDir) + " is there but you may not write it";
    c.fix = "to make links that runsnack-share.service serves: sudo adduser $USER runsnack, then log in again";
  }
  return c;
}

Check check_service() {
  std::error_code ec;
  if (!fs::is_directory(kMachineStateDir, ec))
    return {"service", "skip", "no " + std::string(kMachineStateDir) + " (the Debian package is not installed)", ""};
  auto serving = find_serving_share(kMachineStateDir);
  if (!serving) return {"service", "fail", serving.error().what(), "sudo systemctl restart runsnack-share"};
  if (!*serving)
    return {"service", "warn", "nothing serves " + std::string(kMachineStateDir) + ": links made there are not reachable",
            "sudo systemctl enable --now runsnack-share; `journalctl -u runsnack-share` says why it stopped"};
  const auto& s = **serving;
  return {"service", "ok", "runsnack-share serves " + std::string(kMachineStateDir) + " as " + s.peer.str() + " on " +
                               s.listen + " (pid " + std::to_string(s.pid) + ")", ""};
}

bool running_in_wsl() {
  std::error_code ec;
  if (fs::exists("/dev/dxg", ec)) return true;
  std::string release = read_line("/proc/sys/kernel/osrelease");
  return contains(release, "microsoft") || contains(release, "Microsoft") || contains(release, "WSL");
}

std::string gpu_fix(const std::string& note, bool wsl) {
  if (contains(note, "blocked by the operating system"))
    return "WSL: Windows blocks GPU access. Do not install an NVIDIA driver or nvidia-utils inside WSL (they hide "
           "/usr/lib/wsl/lib); the GPU must be in WDDM mode, not TCC (data-centre GPUs, Windows Server: "
           "`nvidia-smi -dm 0` on Windows, then reboot); update the Windows NVIDIA driver and run `wsl --update` "
           "and `wsl --shutdown`";
  if (wsl && (contains(note, "not found") || contains(note, "could not be loaded")))
    return "WSL: the driver comes from Windows. Install the NVIDIA driver for Windows (not a Linux one inside "
           "WSL), run `wsl --update` and `wsl --shutdown`; /usr/lib/wsl/lib must then hold libnvidia-ml.so.1";
  if (contains(note, "not found") || contains(note, "could not be loaded"))
    return "install the NVIDIA driver (Debian: add non-free to the apt sources, `sudo apt install nvidia-driver`, "
           "reboot); without it this machine shares its CPU only";
  if (contains(note, "Mismatch") || contains(note, "mismatch"))
    return "the NVIDIA kernel module and its libraries differ (a driver upgrade without a reboot): reboot";
  if (contains(note, "Driver Not Loaded") || contains(note, "driver not loaded"))
    return "the NVIDIA kernel module is not loaded: `sudo modprobe nvidia` (with Secure Boot, enrol the "
           "module's key, or sign it), or reboot; `dmesg | grep -i nvrm` says why";
  if (contains(note, "Insufficient Permissions") || contains(note, "No Permission"))
    return "this user cannot open /dev/nvidia*: add it to the group that owns them (ls -l /dev/nvidia*)";
  if (contains(note, "no GPU found"))
    return "the driver sees no GPU: check `nvidia-smi` and `lspci | grep -i nvidia`";
  return "check `nvidia-smi`; RUNSNACK_LOG=debug runsnack gpus shows more";
}

Check check_gpu() {
  GpuReport report = query_gpus({});
  if (report.gpus.empty()) {
    std::string note = report.note.empty() ? "no NVIDIA GPU" : report.note;
    return {"gpu", "warn", note + " (share works, CPU only)", gpu_fix(note, running_in_wsl())};
  }
  std::string detail;
  for (const auto& g : report.gpus)
    detail += (detail.empty() ? "" : ", ") + ("GPU " + std::to_string(g.index) + " " + g.name);
  detail += " (driver " + report.driver_version + ", CUDA " + report.cuda_version + ")";
  if (!report.note.empty()) return {"gpu", "warn", detail + "; " + report.note, gpu_fix(report.note, running_in_wsl())};
  return {"gpu", "ok", detail, ""};
}

Check check_cuda() {
  Check c{"cuda", "ok", "", ""};
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) ::dlclose(driver);
  auto shim = cuda::find_cuda_shim_dir();
  c.detail = std::string(driver ? "CUDA driver found (share --allow cuda can serve)" : "no CUDA driver (libcuda.so.1): "
                                                                                        "share --allow cuda cannot serve here") +
             "; " + (shim ? "runsnack cuda uses the shim in " + shim->string() : "no driver shim: runsnack cuda cannot run programs from here");
  if (!shim) {
    c.status = "warn";
    c.fix = "runsnack cuda needs the shim: a build with the CUDA toolkit's cuda.h, or RUNSNACK_CUDA_LIBDIR naming its folder";
  } else if (!driver) {
    c.status = "warn";
    c.fix = "to serve CUDA, install the NVIDIA driver (see gpu)";
  }
  return c;
}

namespace {

struct ProbeResult {
  int exit_code = -1;    // -1: did not finish in time, or could not start
  std::string errors;    // its stderr, first 1 KiB
};

// Runs argv with envp, as `uid`/`gid` when given, for at most `timeout`; stderr captured.
ProbeResult run_probe(const std::vector<std::string>& argv, const std::vector<std::string>& envp,
                      std::optional<std::pair<uid_t, gid_t>> as, std::chrono::milliseconds timeout) {
  ProbeResult result;
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) return {-1, std::strerror(errno)};
  std::vector<char*> args, env;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : envp) env.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  env.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return {-1, std::strerror(errno)};
  if (pid == 0) {
    ::dup2(err[1], 2);
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    if (as && (::setgroups(0, nullptr) != 0 || ::setgid(as->second) != 0 || ::setuid(as->first) != 0)) ::_exit(126);
    ::execve(args[0], args.data(), env.data());
    ::_exit(127);
  }
  ::close(err[1]);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[512];
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) break;
    pollfd p{err[0], POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) break;
    ssize_t n = ::read(err[0], buf, sizeof buf);
    if (n <= 0) break;
    if (result.errors.size() < 1024) result.errors.append(buf, static_cast<std::size_t>(n));
  }
  ::close(err[0]);
  int status = 0;
  pid_t done = ::waitpid(pid, &status, WNOHANG);
  while (done == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    done = ::waitpid(pid, &status, WNOHANG);
  }
  if (done == pid) {
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    result.errors += "(no answer within " + std::to_string(timeout.count() / 1000) + " s)";
  }
  while (!result.errors.empty() && (result.errors.back() == '\n' || result.errors.back() == ' ')) result.errors.pop_back();
  return result;
}

std::string userns_problem() {
  if (read_line("/proc/sys/user/max_user_namespaces") == "0")
    return "user namespaces are off (user.max_user_namespaces = 0): sudo sysctl -w user.max_user_namespaces=15000, "
           "and the same in /etc/sysctl.d/";
  if (read_line("/proc/sys/kernel/unprivileged_userns_clone") == "0")
    return "unprivileged user namespaces are off: sudo sysctl -w kernel.unprivileged_userns_clone=1, and the same "
           "in /etc/sysctl.d/";
  if (read_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1")
    return "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): give bwrap a profile that allows "
           "them (`userns,` in /etc/apparmor.d/bwrap), or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0";
  return "";
}

Check sandbox_probe(const std::string& bwrap, const std::string& who, std::optional<std::pair<uid_t, gid_t>> as) {
  char tmpl[] = "/tmp/runsnack-doctor-XXXXXX";
  if (!::mkdtemp(tmpl)) return {"sandbox", "fail", std::string("cannot make a scratch folder: ") + std::strerror(errno), ""};
  fs::path workspace = tmpl;
  if (as && ::chown(tmpl, as->first, as->second) != 0) {}
  exec::SandboxSpec spec;
  spec.workspace = workspace;
  spec.argv = {"/bin/sh", "-c", "test -w /workspace"};
  spec.bwrap = bwrap;
  exec::Sandbox sandbox(spec);
  auto result = run_probe(sandbox.argv(), sandbox.envp(), as, std::chrono::seconds(5));
  std::error_code ec;
  fs::remove_all(workspace, ec);
  std::string name = as ? "sandbox (" + who + ")" : "sandbox";
  if (result.exit_code == 0)
    return {name, "ok", "bubblewrap runs the run/shell/pool sandbox " + (as ? "as user " + who : "here"), ""};
  std::string detail = "bubblewrap cannot start the sandbox" + (as ? " as user " + who : std::string()) + ": " +
                       (result.errors.empty() ? "exit " + std::to_string(result.exit_code) : result.errors);
  std::string fix = userns_problem();
  if (fix.empty()) fix = "run `" + bwrap + " --unshare-all --ro-bind / / true` to see why; run, shell, cp and pool workers need it";
  return {name, "fail", detail, fix};
}

}  // namespace

std::vector<Check> check_sandbox() {
  const std::string bwrap = exec::SandboxSpec{}.bwrap;
  if (::access(bwrap.c_str(), X_OK) != 0)
    return {{"sandbox", "fail", bwrap + " is missing: runsnack run, shell, cp and pool workers cannot run commands",
             "sudo apt install bubblewrap"}};
  std::vector<Check> checks;
  checks.push_back(sandbox_probe(bwrap, "", std::nullopt));
  if (::geteuid() == 0) {
    if (const passwd* pw = ::getpwnam("runsnack"))
      checks.push_back(sandbox_probe(bwrap, "runsnack", std::pair{pw->pw_uid, pw->pw_gid}));
    else if (std::string problem = userns_problem(); !problem.empty())
      checks.push_back({"userns", "warn", "as root the sandbox needs no user namespace, but a provider run by "
                                          "another user does", problem});
  }
  return checks;
}

Check check_limits() {
  // The same trial as `share --memory` makes (cmd_share.cpp).
  auto cg = exec::Cgroup::probe_memory_total();
  if (cg) return {"limits", "ok", *cg + ": memory and process limits of run/shell/pool tasks are enforced", ""};
  return {"limits", "warn",
          "no writable cgroup (" + cg.error().message + "): memory and process limits fall back to rlimits, "
          "which bind less (memory per process, not in total; no peak memory; RLIMIT_NPROC counts per user); "
          "share --memory needs --memory-per-process to accept that",
          ::geteuid() == 0 ? "mount cgroup v2 with the memory and pids controllers"
                           : "run the provider as a systemd service with Delegate=yes (the Debian package's "
                             "runsnack-share.service), or as root"};
}

Check check_disk_quota() {
  std::string why;
  auto mounter = exec::image_mounter(&why);
  if (mounter == exec::ImageMounter::kernel)
    return {"disk quota", "ok", "share --disk-quota makes each workspace an ext4 image of that size (a hard total)", ""};
  if (mounter == exec::ImageMounter::fuse2fs)
    return {"disk quota", "ok",
            "share --disk-quota makes each workspace an ext4 image of that size, mounted with fuse2fs through "
            "fusermount3 (a hard total)",
            ""};
  if (mounter)
    return {"disk quota", "ok",
            "share --disk-quota makes each workspace an ext4 image of that size, mounted by fuse2fs in a user and "
            "mount namespace of its own, since fusermount3 cannot mount here (no_new_privs, or not setuid): a hard total",
            ""};
  return {"disk quota", "warn",
          "share --disk-quota can only measure the workspace every 250 ms here (a fast writer passes it briefly): " + why,
          "sudo apt install fuse2fs fuse3 (and /dev/fuse open to users, Debian's default; a service needs "
          "DeviceAllow=/dev/fuse rw), or share as root"};
}

Check fast_open_check(std::optional<int> value) {
  if (!value) return {"fast open", "skip", "net.ipv4.tcp_fastopen is not readable here", ""};
  const std::string fix =
      "sudo sysctl -w net.ipv4.tcp_fastopen=3, and the same line in /etc/sysctl.d/90-runsnack.conf to keep it";
  const bool serves = (*value & 0x2) != 0, asks = (*value & 0x1) != 0;
  if (serves && asks)
    return {"fast open", "ok", "TCP Fast Open on: a returning consumer's new session costs 2 round trips, not 3", ""};
  if (!serves)
    return {"fast open", "warn",
            "this kernel does not serve TCP Fast Open (net.ipv4.tcp_fastopen=" + std::to_string(*value) +
                "): each new session from a consumer costs a round trip more than it could",
            fix};
  return {"fast open", "warn",
          "this kernel does not ask for TCP Fast Open (net.ipv4.tcp_fastopen=" + std::to_string(*value) +
              "): sessions this machine opens as a consumer cost a round trip more",
          fix};
}

Check check_fast_open() {
  const std::string text = read_line("/proc/sys/net/ipv4/tcp_fastopen");
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc()) return fast_open_check(std::nullopt);
  return fast_open_check(value);
}

Check check_ports(PortRange range, std::uint16_t& free_port) {
  free_port = 0;
  std::vector<std::uint16_t> busy;
  for (unsigned p = range.first; p <= range.last && p != 0; ++p) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) break;
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(p));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    if (ok) {
      free_port = static_cast<std::uint16_t>(p);
      break;
    }
    busy.push_back(static_cast<std::uint16_t>(p));
  }
  std::string span = std::to_string(range.first) + "-" + std::to_string(range.last);
  if (free_port == 0)
    return {"ports", "fail", "no port in " + span + " is free to listen on",
            "stop what holds them (ss -ltnp), or choose others: share --port-range A-B"};
  std::string detail = "share can listen on port " + std::to_string(free_port) + " (range " + span + ")";
  if (!busy.empty()) {
    detail += "; in use: " + std::to_string(busy.front()) + (busy.size() > 1 ? "-" + std::to_string(busy.back()) : "");
    detail += " (a running share or runsnack-share.service holds the first one)";
  }
  return {"ports", "ok", detail, ""};
}

}  // namespace runsnack::cli::doctor
