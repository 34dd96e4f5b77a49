#pragma once
// `runsnack doctor`'s checks of this machine: each says what works, what does
// not, and what to do about it. The local ones are here (each well under a
// second); the ones that wait on the network are in doctor_network.hpp.

#include "net/listener.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::cli::doctor {

struct Check {
  std::string name;    // "gpu", "sandbox", ...
  std::string status;  // "ok" | "warn" (works, with a limit) | "fail" (broken) | "skip" (not tried)
  std::string detail;  // what was found
  std::string fix;     // what to do; "" when nothing
};
nlohmann::json to_json(const Check& check);

Check check_state();    // which state folders share/links and the other commands use
Check check_service();  // whether runsnack-share.service serves the machine's state (Debian package)
Check check_gpu();      // NVIDIA driver and NVML
Check check_cuda();     // the CUDA driver (share --allow cuda) and the shim (runsnack cuda)
// bubblewrap runs the real sandbox policy (sandbox/sandbox.hpp) as this user and, as root,
// as the service's user runsnack when it exists; unprivileged user namespaces.
std::vector<Check> check_sandbox();
Check check_limits();  // cgroups for memory and process limits, else rlimits
Check check_disk_quota();  // whether --disk-quota is a filesystem (an ext4 image) or measured
// TCP Fast Open (net/tcp_tuning.hpp): whether this machine's kernel serves it, so that a returning
// consumer's new session costs 2 round trips instead of 3.
Check check_fast_open();
// The same from net.ipv4.tcp_fastopen's value (nullopt: unreadable), pure for tests.
Check fast_open_check(std::optional<int> sysctl_value);
// The first port of `range` this machine can listen on (0.0.0.0), in `free_port`.
Check check_ports(PortRange range, std::uint16_t& free_port);

// The advice for a GPU report's note (gpu/gpu_info.hpp), pure for tests; `wsl`: running in WSL.
std::string gpu_fix(const std::string& note, bool wsl);
bool running_in_wsl();

}  // namespace runsnack::cli::doctor
