// `runsnack __generate ...` (hidden): shell completions and man pages made
// from this binary's own command definitions. The build runs
// `__generate all BUILD/share` after linking (src/cli/CMakeLists.txt); the
// package installs what it wrote.
#include "cli/command.hpp"
#include "cli/completion_scripts.hpp"
#include "cli/man_pages.hpp"
#include "core/paths.hpp"

#include <iostream>

namespace runsnack::cli {

namespace fs = std::filesystem;

namespace {

Result<std::string> completion_for(const CommandSpec& root, const std::string& shell) {
  if (shell == "bash") return bash_completion(root);
  if (shell == "zsh") return zsh_completion(root);
  if (shell == "fish") return fish_completion(root);
  return fail(errc::invalid_argument, "no completion for '" + shell + "': choose bash, zsh or fish");
}

Result<void> write(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return fail(errc::io_error, "cannot create " + path.parent_path().string() + ": " + ec.message());
  return write_file_atomic(path, text, 0644);
}

Result<void> write_man_pages(const CommandSpec& root, const fs::path& dir) {
  for (const auto& [file, text] : man_pages(root, kVersion))
    if (auto r = write(dir / file, text); !r) return r;
  return {};
}

// The layout of PREFIX/share, so that the build folder's share/ installs as it is.
Result<void> write_all(const CommandSpec& root, const fs::path& share) {
  if (auto r = write_man_pages(root, share / "man" / "man1"); !r) return r;
  if (auto r = write(share / "bash-completion" / "completions" / "runsnack", bash_completion(root)); !r) return r;
  if (auto r = write(share / "zsh" / "vendor-completions" / "_runsnack", zsh_completion(root)); !r) return r;
  return write(share / "fish" / "vendor_completions.d" / "runsnack.fish", fish_completion(root));
}

}  // namespace

void add_generate_command(CLI::App& app, ExitStatus& status) {
  auto* cmd = app.add_subcommand("__generate", "Write shell completions and man pages from the command definitions");
  cmd->group("");  // hidden: the build and packagers use it
  cmd->require_subcommand(1);

  auto shell = std::make_shared<std::string>();
  auto* completion = cmd->add_subcommand("completion", "Print the completion script for SHELL on stdout");
  completion->add_option("SHELL", *shell, "bash, zsh or fish")->required();
  completion->callback([&app, &status, shell] {
    run_command(status, [&] {
      auto text = completion_for(describe(app), *shell);
      if (!text) return report(text.error());
      std::cout << *text << std::flush;
      return 0;
    });
  });

  auto dir = std::make_shared<std::string>();
  auto* man = cmd->add_subcommand("man", "Write runsnack.1 and runsnack-COMMAND.1 into DIR");
  man->add_option("DIR", *dir, "Output folder")->required();
  man->callback([&app, &status, dir] {
    run_command(status, [&] {
      auto r = write_man_pages(describe(app), *dir);
      return r ? 0 : report(r.error());
    });
  });

  auto share = std::make_shared<std::string>();
  auto* all = cmd->add_subcommand("all", "Write man pages and completions under DIR as PREFIX/share lays them out");
  all->add_option("DIR", *share, "Output folder, e.g. build/dev/share")->required();
  all->callback([&app, &status, share] {
    run_command(status, [&] {
      auto r = write_all(describe(app), *share);
      return r ? 0 : report(r.error());
    });
  });
}

}  // namespace runsnack::cli
