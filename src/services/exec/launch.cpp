#include "services/exec/launch.hpp"

#include "core/paths.hpp"

#include <algorithm>
#include <regex>

namespace runsnack::exec {

namespace sfs = std::filesystem;

Result<sfs::path> workspace_for(const PeerId& consumer) {
  auto dir = state_dir();
  if (!dir) return dir.error();
  return *dir / "workspaces" / consumer.str();
}

std::vector<int> allowed_gpus(const Grant& grant) {
  std::vector<int> out;
  static const std::regex re("nvidia([0-9]+)");
  std::error_code ec;
  for (const auto& e : sfs::directory_iterator("/dev", ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, re)) continue;
    const int g = std::stoi(m[1]);
    if (grant.gpus.empty() || std::find(grant.gpus.begin(), grant.gpus.end(), g) != grant.gpus.end()) out.push_back(g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

LaunchLimits prepare_limits(const RunTerms& terms, const std::string& name) {
  LaunchLimits out;
  auto cg = Cgroup::create(name, terms.max_procs, terms.memory_bytes);
  if (cg) {
    out.cgroup.emplace(std::move(*cg));
    out.mode = out.cgroup->mode();
  } else {
    out.mode = "rlimits";
    out.rlimits.push_back({RLIMIT_NPROC, terms.max_procs});
    if (terms.memory_bytes) out.rlimits.push_back({RLIMIT_AS, *terms.memory_bytes});
  }
  if (terms.disk_quota_bytes) out.rlimits.push_back({RLIMIT_FSIZE, *terms.disk_quota_bytes});
  return out;
}

}  // namespace runsnack::exec
