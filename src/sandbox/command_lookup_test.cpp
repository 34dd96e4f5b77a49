// The run command's lookup before launch: what execvp would find in the sandbox.
#include "sandbox/command_lookup.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace runsnack::exec {
namespace {

namespace sfs = std::filesystem;
constexpr const char* kPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

TEST(CommandLookup, LikeExecvpInTheSandbox) {
  sfs::path ws = sfs::temp_directory_path() / ("runsnack-lookup-" + std::to_string(::getpid()));
  sfs::create_directories(ws / "sub");
  std::ofstream(ws / "script.sh") << "#!/bin/sh\n";
  std::ofstream(ws / "tool") << "#!/bin/sh\n";
  sfs::permissions(ws / "tool", sfs::perms::owner_all);
  sfs::create_symlink("/workspace/tool", ws / "link");

  EXPECT_EQ(lookup_command("sh", ws, kPath), CommandLookup::found);
  EXPECT_EQ(lookup_command("no-such-command-runsnack", ws, kPath), CommandLookup::not_found);
  EXPECT_EQ(lookup_command("/usr/bin/no-such-command-runsnack", ws, kPath), CommandLookup::not_found);
  EXPECT_EQ(lookup_command("/bin/sh", ws, kPath), CommandLookup::found);
  EXPECT_EQ(lookup_command("./tool", ws, kPath), CommandLookup::found);
  EXPECT_EQ(lookup_command("/workspace/tool", ws, kPath), CommandLookup::found);
  EXPECT_EQ(lookup_command("./script.sh", ws, kPath), CommandLookup::not_executable);
  EXPECT_EQ(lookup_command("sub", ws, "/workspace"), CommandLookup::not_executable);
  EXPECT_EQ(lookup_command("./missing", ws, kPath), CommandLookup::not_found);
  EXPECT_EQ(lookup_command("./link", ws, kPath), CommandLookup::unknown);        // resolved inside only
  EXPECT_EQ(lookup_command("./nodir/x", ws, kPath), CommandLookup::unknown);     // ancestors not certain
  EXPECT_EQ(lookup_command("/tmp/x", ws, kPath), CommandLookup::unknown);        // the sandbox's own /tmp
  EXPECT_EQ(lookup_command("x", ws, "bin:/usr/bin"), CommandLookup::unknown);    // relative PATH entry
  EXPECT_EQ(lookup_command("sh", ws, kPath, {"/usr"}), CommandLookup::unknown);  // hidden by a tmpfs
  EXPECT_EQ(lookup_exit_status(CommandLookup::not_found), 127);
  EXPECT_EQ(lookup_exit_status(CommandLookup::not_executable), 126);
  EXPECT_EQ(lookup_exit_status(CommandLookup::unknown), 0);
  sfs::remove_all(ws);
}

}  // namespace
}  // namespace runsnack::exec
