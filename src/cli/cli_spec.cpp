#include "cli/cli_spec.hpp"

#include <algorithm>

namespace runsnack::cli {

namespace {

bool hidden_group(const std::string& group) { return group.empty(); }

OptionSpec describe_option(const CLI::Option& opt) {
  OptionSpec o;
  for (const auto& s : opt.get_snames()) o.names.push_back("-" + s);
  for (const auto& l : opt.get_lnames()) o.names.push_back("--" + l);
  o.takes_value = opt.get_items_expected_max() > 0;  // a flag expects no item
  if (o.takes_value) {
    o.value_name = opt.get_type_name();
    if (auto colon = o.value_name.find(':'); colon != std::string::npos) o.value_name.resize(colon);
    if (o.value_name.empty()) o.value_name = "VALUE";
  }
  o.help = opt.get_description();
  return o;
}

void walk(const CommandSpec& c, std::vector<std::string> words, std::vector<CommandPath>& out) {
  words.push_back(c.name);
  out.push_back({words, &c});
  for (const auto& sub : c.subcommands) walk(sub, words, out);
}

}  // namespace

CommandSpec describe(const CLI::App& app) {
  CommandSpec c;
  c.name = app.get_name();
  c.help = app.get_description();
  c.footer = app.get_footer();
  for (const CLI::Option* opt : app.get_options()) {
    if (hidden_group(opt->get_group())) continue;
    if (opt->get_positional() && !opt->nonpositional()) {
      c.positionals.push_back({opt->get_name(true), opt->get_description(), opt->get_required(),
                               opt->get_items_expected_max() > 1});
    } else if (opt->nonpositional()) {
      c.options.push_back(describe_option(*opt));
    }
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); }))
    c.subcommands.push_back(describe(*sub));
  return c;
}

std::string CommandPath::joined(const char* separator) const {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : separator) + w;
  return s;
}

std::vector<CommandPath> all_commands(const CommandSpec& root) {
  std::vector<CommandPath> out;
  walk(root, {}, out);
  return out;
}

}  // namespace runsnack::cli
