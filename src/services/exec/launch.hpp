#pragma once
// What `run` and `shell` share to start a command in the sandbox: the
// consumer's workspace folder, the GPUs the grant lets it use, and the
// limits in force (a cgroup when one can be made, else rlimits).

#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "link/grant.hpp"
#include "services/exec/cgroup.hpp"
#include "services/exec/run_terms.hpp"

#include <sys/resource.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runsnack::exec {

struct LaunchLimits {
  std::optional<Cgroup> cgroup;                 // owns the group: its destructor kills what is left
  std::vector<std::pair<int, rlim_t>> rlimits;  // applied in the child before exec
  std::string mode;                             // "cgroup v2", "cgroup v1" or "rlimits"
};

// <state dir>/workspaces/<consumer PeerId>.
Result<std::filesystem::path> workspace_for(const PeerId& consumer);
// The host's /dev/nvidiaN indices that the grant shares (all of them when it names none).
std::vector<int> allowed_gpus(const Grant& grant);
// A fresh cgroup `name` with the terms' limits, or rlimits where no cgroup can be made.
LaunchLimits prepare_limits(const RunTerms& terms, const std::string& name);

}  // namespace runsnack::exec
