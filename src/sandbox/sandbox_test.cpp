#include "sandbox/sandbox.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace runsnack::exec {
namespace {

HostView fake_host() {
  static const std::set<std::string> present = {"/usr", "/bin", "/lib", "/etc", "/etc/shadow", "/etc/ssh",
                                                "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/sys"};
  HostView v;
  v.exists = [](const std::filesystem::path& p) { return present.count(p.string()) > 0; };
  v.symlink_target = [](const std::filesystem::path& p) -> std::optional<std::string> {
    if (p == "/bin") return "usr/bin";
    if (p == "/lib") return "usr/lib";
    return std::nullopt;
  };
  return v;
}

bool has_seq(const std::vector<std::string>& a, std::vector<std::string> seq) {
  return std::search(a.begin(), a.end(), seq.begin(), seq.end()) != a.end();
}

SandboxSpec spec() {
  SandboxSpec s;
  s.workspace = "/state/workspaces/peer";
  s.argv = {"python3", "train.py"};
  s.hidden = {"/state", "/etc/runsnack"};
  return s;
}

TEST(Sandbox, DefaultIsolation) {
  auto a = Sandbox(spec(), fake_host()).argv();
  EXPECT_EQ(a.front(), "/usr/bin/bwrap");
  for (const char* flag : {"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                           "--unshare-net"})
    EXPECT_NE(std::find(a.begin(), a.end(), flag), a.end()) << flag;
  EXPECT_TRUE(has_seq(a, {"--ro-bind", "/usr", "/usr"}));
  EXPECT_TRUE(has_seq(a, {"--symlink", "usr/bin", "/bin"}));
  EXPECT_TRUE(has_seq(a, {"--ro-bind", "/dev/null", "/etc/shadow"}));
  EXPECT_TRUE(has_seq(a, {"--size", "4096", "--tmpfs", "/etc/ssh"}));
  EXPECT_TRUE(has_seq(a, {"--size", "4096", "--tmpfs", "/etc/runsnack"}));  // hidden path under a bound folder
  EXPECT_TRUE(has_seq(a, {"--tmpfs", "/tmp"}));
  EXPECT_TRUE(has_seq(a, {"--bind", "/state/workspaces/peer", "/workspace"}));
  EXPECT_TRUE(has_seq(a, {"--remount-ro", "/", "--chdir", "/workspace"}));
  EXPECT_TRUE(has_seq(a, {"--", "python3", "train.py"}));
  for (const auto& arg : a) {
    EXPECT_NE(arg, "/root");
    EXPECT_NE(arg, "/home");
    EXPECT_EQ(arg.find("nvidia"), std::string::npos);  // no GPU granted
  }
}

TEST(Sandbox, NetworkAndGpus) {
  auto s = spec();
  s.network = true;
  s.gpus = {1};
  Sandbox box(s, fake_host());
  auto a = box.argv();
  EXPECT_EQ(std::find(a.begin(), a.end(), "--unshare-net"), a.end());
  EXPECT_TRUE(has_seq(a, {"--dev-bind", "/dev/nvidia1", "/dev/nvidia1"}));
  EXPECT_TRUE(has_seq(a, {"--dev-bind", "/dev/nvidiactl", "/dev/nvidiactl"}));
  EXPECT_FALSE(has_seq(a, {"--dev-bind", "/dev/nvidia0", "/dev/nvidia0"}));
  auto env = box.envp();
  EXPECT_NE(std::find(env.begin(), env.end(), "CUDA_VISIBLE_DEVICES=1"), env.end());
}

TEST(Sandbox, ConsumerCannotWidenGpus) {
  auto s = spec();
  s.env = {{"CUDA_VISIBLE_DEVICES", "0,1,2"}, {"FOO", "bar"}};
  auto env = Sandbox(s, fake_host()).envp();
  EXPECT_NE(std::find(env.begin(), env.end(), "CUDA_VISIBLE_DEVICES="), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "FOO=bar"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "HOME=/workspace"), env.end());
}


// Never a capability, never a nested user namespace, bounded scratch space, the filter and
// the descriptors where the launcher put them.
TEST(Sandbox, UnprivilegedAndBounded) {
  auto s = spec();
  s.fds = {.info = 3, .seccomp = 4, .passwd = 5, .group = 6, .workspace = 7, .self = 8};
  s.tmp_bytes = 200 << 20;
  auto a = Sandbox(s, fake_host()).argv();
  EXPECT_TRUE(has_seq(a, {"/usr/bin/bwrap", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"}));
  EXPECT_TRUE(has_seq(a, {"--size", std::to_string(200 << 20), "--tmpfs", "/tmp"}));
  EXPECT_TRUE(has_seq(a, {"--size", std::to_string(200 << 20), "--tmpfs", "/dev/shm"}));
  EXPECT_TRUE(has_seq(a, {"--size", std::to_string(kRunTmpfsBytes), "--tmpfs", "/run"}));
  EXPECT_TRUE(has_seq(a, {"--ro-bind-data", "5", "/etc/passwd"}));
  EXPECT_TRUE(has_seq(a, {"--ro-bind-data", "6", "/etc/group"}));
  EXPECT_TRUE(has_seq(a, {"--bind-fd", "7", "/workspace"}));
  EXPECT_TRUE(has_seq(a, {"--ro-bind-fd", "8", kSelfMount}));
  EXPECT_TRUE(has_seq(a, {"--remount-ro", "/dev", "--remount-ro", "/"}));
  EXPECT_TRUE(has_seq(a, {"--info-fd", "3", "--seccomp", "4", "--"}));
  EXPECT_EQ(std::find(a.begin(), a.end(), "/state/workspaces/peer"), a.end());  // by descriptor only
  // /etc/passwd lies after the /etc bind it covers.
  EXPECT_LT(std::find(a.begin(), a.end(), "/etc") - a.begin(), std::find(a.begin(), a.end(), "/etc/passwd") - a.begin());
}

TEST(Sandbox, NoWorkspaceIsAnEmptyFolder) {
  auto s = spec();
  s.workspace.clear();
  auto a = Sandbox(s, fake_host()).argv();
  EXPECT_TRUE(has_seq(a, {"--size", std::to_string(kRunTmpfsBytes), "--tmpfs", "/workspace"}));
}

TEST(Sandbox, PasswdNamesOnlyTheSandboxUser) {
  const std::string passwd = Sandbox::passwd(1879048300, 1879048300);
  EXPECT_NE(passwd.find("runsnack:x:1879048300:1879048300:"), std::string::npos);
  EXPECT_EQ(std::count(passwd.begin(), passwd.end(), '\n'), 3);
  EXPECT_NE(Sandbox::group(7).find("runsnack:x:7:"), std::string::npos);
}

// The shell has a fresh pty as controlling terminal: --new-session would take it away (no job control).
TEST(Sandbox, OwnPtyKeepsSession) {
  auto s = spec();
  s.own_pty = true;
  auto a = Sandbox(s, fake_host()).argv();
  EXPECT_EQ(std::find(a.begin(), a.end(), "--new-session"), a.end());
  for (const char* flag : {"--die-with-parent", "--unshare-pid", "--unshare-net"})
    EXPECT_NE(std::find(a.begin(), a.end(), flag), a.end()) << flag;
}

}  // namespace
}  // namespace runsnack::exec
