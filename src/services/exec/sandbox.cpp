#include "services/exec/sandbox.hpp"

#include <unistd.h>

namespace runsnack::exec {

namespace sfs = std::filesystem;

HostView HostView::real() {
  HostView v;
  v.exists = [](const sfs::path& p) {
    std::error_code ec;
    return sfs::exists(sfs::symlink_status(p, ec));
  };
  v.symlink_target = [](const sfs::path& p) -> std::optional<std::string> {
    std::error_code ec;
    if (!sfs::is_symlink(sfs::symlink_status(p, ec))) return std::nullopt;
    auto t = sfs::read_symlink(p, ec);
    if (ec) return std::nullopt;
    return t.string();
  };
  return v;
}

namespace {

bool is_under(const sfs::path& p, const sfs::path& dir) {
  auto rel = p.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

std::vector<std::string> Sandbox::argv() const {
  std::vector<std::string> a = {spec_.bwrap, "--die-with-parent"};
  if (!spec_.own_pty) a.push_back("--new-session");
  a.insert(a.end(), {"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"});
  if (!spec_.network) a.push_back("--unshare-net");
  a.insert(a.end(), {"--hostname", "runsnack"});
  // The system, read-only. Merged-/usr hosts have /bin etc. as symlinks: recreate them as symlinks.
  std::vector<sfs::path> bound;
  for (const char* dir : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}) {
    if (!host_.exists(dir)) continue;
    if (auto target = host_.symlink_target(dir)) {
      a.insert(a.end(), {"--symlink", *target, dir});
    } else {
      a.insert(a.end(), {"--ro-bind", dir, dir});
      bound.emplace_back(dir);
    }
  }
  // Secrets in /etc: password hashes, host keys, private TLS keys.
  for (const char* secret : {"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"})
    if (host_.exists(secret)) a.insert(a.end(), {"--ro-bind", "/dev/null", secret});
  for (const char* secret : {"/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d"})
    if (host_.exists(secret)) a.insert(a.end(), {"--tmpfs", secret});
  for (const auto& h : spec_.hidden)
    for (const auto& b : bound)
      if (is_under(h, b) || h == b) a.insert(a.end(), {"--tmpfs", h.string()});
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run"});
  // GPUs: the control nodes plus one node per allowed index.
  if (!spec_.gpus.empty()) {
    for (const char* node : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"})
      if (host_.exists(node)) a.insert(a.end(), {"--dev-bind", node, node});
    for (int g : spec_.gpus) {
      std::string node = "/dev/nvidia" + std::to_string(g);
      if (host_.exists(node)) a.insert(a.end(), {"--dev-bind", node, node});
    }
    if (host_.exists("/sys")) a.insert(a.end(), {"--ro-bind", "/sys", "/sys"});
  }
  a.insert(a.end(), {"--bind", spec_.workspace.string(), kWorkspaceMount, "--chdir", kWorkspaceMount});
  if (spec_.info_fd >= 0) a.insert(a.end(), {"--info-fd", std::to_string(spec_.info_fd)});
  a.push_back("--");
  a.insert(a.end(), spec_.argv.begin(), spec_.argv.end());
  return a;
}

std::vector<std::string> Sandbox::envp() const {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", kWorkspaceMount},
      {"TMPDIR", "/tmp"},
      {"LANG", "C.UTF-8"},
      {"RUNSNACK", "1"},
  };
  std::string cuda;
  for (int g : spec_.gpus) cuda += (cuda.empty() ? "" : ",") + std::to_string(g);
  for (const auto& [k, v] : spec_.env) env[k] = v;
  env["CUDA_VISIBLE_DEVICES"] = cuda;  // empty: no GPU visible; the consumer cannot widen it
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";  // so CUDA numbers GPUs as NVML (and our indices) do
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace runsnack::exec
