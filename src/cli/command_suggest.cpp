#include "cli/command_suggest.hpp"

#include "cli/command.hpp"
#include "core/printable.hpp"

#include <algorithm>
#include <iostream>

namespace runsnack::cli {

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<const CLI::App*> visible(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); });
}

}  // namespace

std::optional<std::string> nearest_command(const CLI::App& app, const std::string& word) {
  if (word.empty() || word.size() > 64) return std::nullopt;
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(1, word.size() / 3) + 1;
  for (const CLI::App* sub : visible(app)) {
    const std::string& name = sub->get_name();
    std::size_t d = name.rfind(word, 0) == 0 ? 0 : edit_distance(word, name);
    if (d < best_distance) best_distance = d, best = name;
  }
  return best;
}

std::optional<int> handle_top_level(CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << app.help() << std::flush;
    return kExitUsage;
  }
  const std::string& first = args[0];
  if (first == "help") {
    CLI::App* target = &app;
    for (std::size_t i = 1; i < args.size(); ++i) {
      CLI::App* sub = nullptr;
      try {
        sub = target->get_subcommand(args[i]);
      } catch (const CLI::OptionNotFound&) {
      }
      if (!sub || sub->get_group().empty()) {
        auto near = nearest_command(*target, args[i]);
        std::cerr << "runsnack: no command '" << printable(args[i]) << "'"
                  << (near ? "; did you mean `" + *near + "`?" : std::string()) << " (`runsnack help` lists them)"
                  << std::endl;
        return kExitUsage;
      }
      target = sub;
    }
    std::cout << target->help() << std::flush;
    return 0;
  }
  if (first.empty() || first[0] == '-') return std::nullopt;
  try {
    app.get_subcommand(first);  // hidden ones too: they still run
    return std::nullopt;
  } catch (const CLI::OptionNotFound&) {
  }
  auto near = nearest_command(app, first);
  std::cerr << "runsnack: '" << printable(first) << "' is not a command"
            << (near ? "; did you mean `runsnack " + *near + "`?" : std::string()) << " (`runsnack help` lists them)"
            << std::endl;
  return kExitUsage;
}

}  // namespace runsnack::cli
