#include "sandbox/sandbox.hpp"

#include "sandbox/command_lookup.hpp"

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
  std::vector<std::string> a = {spec_.bwrap, "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
                                "--die-with-parent"};
  if (!spec_.own_pty) a.push_back("--new-session");
  a.insert(a.end(), {"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"});
  if (!spec_.network) a.push_back("--unshare-net");
  a.insert(a.end(), {"--hostname", "runsnack"});
  auto fd = [](int n) { return std::to_string(n); };
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
  // The command's own user and group names; the host's accounts stay the host's.
  if (spec_.fds.passwd >= 0) a.insert(a.end(), {"--ro-bind-data", fd(spec_.fds.passwd), "/etc/passwd"});
  if (spec_.fds.group >= 0) a.insert(a.end(), {"--ro-bind-data", fd(spec_.fds.group), "/etc/group"});
  // Secrets in /etc: password hashes, host keys, private TLS keys. The covering tmpfs are a page
  // each: the command owns them inside and could otherwise fill memory through them.
  for (const char* secret : {"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"})
    if (host_.exists(secret)) a.insert(a.end(), {"--ro-bind", "/dev/null", secret});
  auto empty_dir = [&](const std::string& path) { a.insert(a.end(), {"--size", "4096", "--tmpfs", path}); };
  for (const char* secret : {"/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d"})
    if (host_.exists(secret)) empty_dir(secret);
  for (const auto& h : spec_.hidden)
    for (const auto& b : bound)
      if (is_under(h, b) || h == b) empty_dir(h.string());
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev"});
  // Scratch space, bounded: it is memory.
  auto tmpfs = [&](const char* path, std::uint64_t bytes) {
    if (bytes > 0) a.insert(a.end(), {"--size", std::to_string(bytes)});
    a.insert(a.end(), {"--tmpfs", path});
  };
  tmpfs("/tmp", spec_.tmp_bytes);
  tmpfs("/dev/shm", spec_.tmp_bytes);
  tmpfs("/run", kRunTmpfsBytes);
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
  if (spec_.fds.workspace >= 0) a.insert(a.end(), {"--bind-fd", fd(spec_.fds.workspace), kWorkspaceMount});
  else if (!spec_.workspace.empty()) a.insert(a.end(), {"--bind", spec_.workspace.string(), kWorkspaceMount});
  else tmpfs(kWorkspaceMount, kRunTmpfsBytes);
  if (spec_.fds.self >= 0) a.insert(a.end(), {"--ro-bind-fd", fd(spec_.fds.self), kSelfMount});
  else if (!spec_.self_path.empty()) a.insert(a.end(), {"--ro-bind", spec_.self_path.string(), kSelfMount});
  // Nothing else is writable: not the sandbox's own root, not /dev.
  a.insert(a.end(), {"--remount-ro", "/dev", "--remount-ro", "/", "--chdir", kWorkspaceMount});
  if (spec_.fds.info >= 0) a.insert(a.end(), {"--info-fd", fd(spec_.fds.info)});
  if (spec_.fds.seccomp >= 0) a.insert(a.end(), {"--seccomp", fd(spec_.fds.seccomp)});
  a.push_back("--");
  a.insert(a.end(), spec_.argv.begin(), spec_.argv.end());
  return a;
}

std::string Sandbox::passwd(uid_t uid, gid_t gid) {
  const std::string ids = std::to_string(uid) + ":" + std::to_string(gid);
  return "root:x:0:0:root:/root:/usr/sbin/nologin\n" + std::string(kSandboxUserName) + ":x:" + ids +
         ":RunSnack sandbox:" + kWorkspaceMount + ":/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
}

std::string Sandbox::group(gid_t gid) {
  return "root:x:0:\n" + std::string(kSandboxUserName) + ":x:" + std::to_string(gid) + ":\nnogroup:x:65534:\n";
}

std::vector<std::string> Sandbox::envp() const {
  std::map<std::string, std::string> env = {
      {"PATH", kSandboxPath},
      {"HOME", kWorkspaceMount},
      {"TMPDIR", "/tmp"},
      {"LANG", "C.UTF-8"},
      {"RUNSNACK", "1"},
      {"USER", kSandboxUserName},
      {"LOGNAME", kSandboxUserName},
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
