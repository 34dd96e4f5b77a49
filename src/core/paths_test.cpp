#include "core/paths.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace runsnack {
namespace {

namespace fs = std::filesystem;

const fs::path kMachine = "/machine/runsnack";

StateEnvironment env_with(std::optional<std::string> runsnack_home, bool machine_usable) {
  StateEnvironment env;
  env.runsnack_home = std::move(runsnack_home);
  env.xdg_data_home = "/home/alice/.data";
  env.home = "/home/alice";
  env.machine_dir_usable = machine_usable;
  return env;
}

TEST(StateRule, RunsnackHomeAlwaysWins) {
  for (auto scope : {StateScope::user, StateScope::machine}) {
    auto c = choose_state_dir(scope, env_with("/srv/rs", true), kMachine);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->dir, "/srv/rs");
    EXPECT_EQ(c->source, StateSource::runsnack_home);
  }
}

TEST(StateRule, MachineScopeUsesTheMachineFolderOnlyWhenUsable) {
  auto c = choose_state_dir(StateScope::machine, env_with(std::nullopt, true), kMachine);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dir, kMachine);
  EXPECT_EQ(c->source, StateSource::machine);

  c = choose_state_dir(StateScope::machine, env_with(std::nullopt, false), kMachine);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dir, "/home/alice/.data/runsnack");
  EXPECT_EQ(c->source, StateSource::xdg);
}

TEST(StateRule, UserScopeNeverUsesTheMachineFolder) {
  auto c = choose_state_dir(StateScope::user, env_with(std::nullopt, true), kMachine);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dir, "/home/alice/.data/runsnack");
}

TEST(StateRule, HomeFallbackAndNoHome) {
  StateEnvironment env;
  env.home = "/home/bob";
  auto c = choose_state_dir(StateScope::user, env, kMachine);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dir, "/home/bob/.local/share/runsnack");
  EXPECT_EQ(c->source, StateSource::home);
  EXPECT_FALSE(choose_state_dir(StateScope::user, StateEnvironment{}, kMachine));
}

TEST(StateRule, MachineFolderMustExist) {
  fs::path dir = fs::temp_directory_path() / ("rs-machine-" + std::to_string(::getpid()));
  EXPECT_FALSE(StateEnvironment::current(dir).machine_dir_usable);
  fs::create_directories(dir);
  // Writable by this test's user, so usable; a folder it cannot write is not (checked as non-root in the
  // package test, where a user outside group runsnack falls back to their own state).
  EXPECT_EQ(StateEnvironment::current(dir).machine_dir_usable, ::access(dir.c_str(), W_OK | X_OK) == 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace runsnack
