// Completions and man pages are generated from CLI11 definitions: a small app stands in for runsnack's.
#include "cli/cli_spec.hpp"
#include "cli/completion_scripts.hpp"
#include "cli/man_pages.hpp"

#include <gtest/gtest.h>

namespace runsnack::cli {
namespace {

struct SmallApp {
  CLI::App app{"Share things", "runsnack"};
  std::string gpu, link, dir;
  bool json = false;
  SmallApp() {
    app.set_version_flag("--version", "runsnack 9");
    auto* share = app.add_subcommand("share", "Share this machine: print a link");
    share->add_option("--gpu", gpu, "GPUs: 0 or 0,1 [default: all]");
    share->add_flag("--json", json, "Print it's JSON");
    share->footer("Line one.\n.dangerous line\n  indented \\ backslash");
    auto* pool = app.add_subcommand("pool", "The compute pool");
    auto* serve = pool->add_subcommand("serve", "Run a coordinator");
    serve->add_option("--db", dir, "Database: sqlite:PATH");
    auto* join = pool->add_subcommand("join", "Join as a worker");
    join->add_option("LINK", link, "The join link")->required();
    auto* hidden = app.add_subcommand("__secret", "Hidden");
    hidden->group("");
    share->add_flag("--internal", json, "hidden flag")->group("");
  }
};

TEST(CliSpec, DescribesVisibleCommandsAndOptions) {
  SmallApp s;
  CommandSpec root = describe(s.app);
  ASSERT_EQ(root.subcommands.size(), 2u);  // __secret is hidden
  const CommandSpec& share = root.subcommands[0];
  EXPECT_EQ(share.name, "share");
  std::vector<std::string> names;
  for (const auto& o : share.options) names.insert(names.end(), o.names.begin(), o.names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"-h", "--help", "--gpu", "--json"}));
  EXPECT_TRUE(share.options[1].takes_value);
  EXPECT_FALSE(share.options[2].takes_value);
  const CommandSpec& join = root.subcommands[1].subcommands[1];
  ASSERT_EQ(join.positionals.size(), 1u);
  EXPECT_EQ(join.positionals[0].name, "LINK");
  EXPECT_TRUE(join.positionals[0].required);
  auto paths = all_commands(root);
  ASSERT_EQ(paths.size(), 5u);
  EXPECT_EQ(paths[3].joined(), "runsnack pool serve");
}

TEST(Completion, BashKnowsSubcommandsAndValuedOptions) {
  SmallApp s;
  std::string bash = bash_completion(describe(s.app));
  EXPECT_NE(bash.find("'runsnack') echo 'share pool'"), std::string::npos) << bash;
  EXPECT_NE(bash.find("'runsnack pool') echo 'serve join'"), std::string::npos);
  EXPECT_NE(bash.find("'runsnack share --gpu'"), std::string::npos);
  EXPECT_EQ(bash.find("'runsnack share --json'"), std::string::npos);  // a flag takes no value
  EXPECT_EQ(bash.find("__secret"), std::string::npos);
  EXPECT_EQ(bash.find("--internal"), std::string::npos);
  EXPECT_NE(bash.find("complete -F _runsnack runsnack"), std::string::npos);
}

TEST(Completion, ZshAndFishQuoteHelpText) {
  SmallApp s;
  CommandSpec root = describe(s.app);
  std::string zsh = zsh_completion(root);
  EXPECT_EQ(zsh.rfind("#compdef runsnack", 0), 0u);
  EXPECT_NE(zsh.find("_runsnack_pool_serve()"), std::string::npos);
  EXPECT_NE(zsh.find("'--gpu=[GPUs\\: 0 or 0,1 \\[default\\: all\\]]:TEXT:_files'"), std::string::npos) << zsh;
  EXPECT_NE(zsh.find("Print it'\\''s JSON"), std::string::npos);
  std::string fish = fish_completion(root);
  EXPECT_NE(fish.find("-l gpu -r"), std::string::npos) << fish;
  EXPECT_NE(fish.find("'Print it\\'s JSON'"), std::string::npos);
  EXPECT_NE(fish.find("-a 'serve'"), std::string::npos);
}

TEST(ManPages, OnePagePerCommandWithRoffEscaped) {
  SmallApp s;
  auto pages = man_pages(describe(s.app), "9.9");
  ASSERT_EQ(pages.size(), 3u);
  EXPECT_EQ(pages[0].first, "runsnack.1");
  EXPECT_EQ(pages[1].first, "runsnack-share.1");
  const std::string& share = pages[1].second;
  EXPECT_NE(share.find(".TH RUNSNACK\\-SHARE 1 \"\" \"runsnack 9.9\""), std::string::npos) << share;
  EXPECT_NE(share.find("\\&.dangerous line"), std::string::npos);  // not a roff request
  EXPECT_NE(share.find("\nindented \\e backslash"), std::string::npos);
  EXPECT_NE(share.find("\\fB\\-\\-gpu\\fR \\fITEXT\\fR"), std::string::npos);
  const std::string& pool = pages[2].second;
  EXPECT_NE(pool.find(".SS \"runsnack pool join\""), std::string::npos) << pool;
  EXPECT_NE(pool.find("\\fILINK\\fR"), std::string::npos);
  EXPECT_NE(pages[0].second.find(".BR runsnack\\-pool (1)"), std::string::npos);
}

}  // namespace
}  // namespace runsnack::cli
