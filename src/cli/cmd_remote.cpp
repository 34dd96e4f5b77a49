#include "cli/command.hpp"
#include "cli/link_arg.hpp"
#include "cli/state.hpp"
#include "store/remote_store.hpp"

#include <iostream>

namespace runsnack::cli {

namespace {

Result<RemoteStore> open_remotes() {
  auto file = state_path("remotes.json");
  if (!file) return file.error();
  return RemoteStore(*file);
}

}  // namespace

void add_remote_command(CLI::App& app, ExitStatus& status) {
  auto* remote = app.add_subcommand("remote", "Save links under short names (links are credentials)");
  remote->require_subcommand(1);
  remote->footer(
      "A saved link is kept in the state directory with mode 0600, so it stays off command lines\n"
      "and shell history. Use the NAME wherever a command takes a LINK.");

  struct AddArgs { std::string name, link; bool replace = false; };
  auto add_args = std::make_shared<AddArgs>();
  auto* add = remote->add_subcommand("add", "Save LINK as NAME ('-' reads the link from stdin)");
  add->add_option("NAME", add_args->name, "Name to save it under ([A-Za-z0-9._-], up to 64)")->required();
  add->add_option("LINK", add_args->link, "The link, or '-' to read it from stdin")->required();
  add->add_flag("--replace", add_args->replace, "Overwrite an existing name");
  add->callback([&status, add_args] {
    run_command(status, [&] {
      std::string text = add_args->link;
      if (text == "-") {
        auto line = read_link_from_stdin();
        if (!line) return report(line.error());
        text = *line;
      }
      auto link = parse_link(text);
      if (!link) return report(link.error());
      auto remotes = open_remotes();
      if (!remotes) return report(remotes.error());
      if (auto r = remotes->add(add_args->name, format_link(*link), add_args->replace); !r) return report(r.error());
      std::cout << "saved '" << add_args->name << "' (provider " << link->provider.str() << ")" << std::endl;
      return 0;
    });
  });

  auto list_json = std::make_shared<bool>(false);
  auto* list = remote->add_subcommand("list", "List saved names (secrets are not shown)");
  list->add_flag("--json", *list_json, "One JSON array of {name, provider, grant, rendezvous, candidates}");
  list->callback([&status, list_json] {
    run_command(status, [&] {
      auto remotes = open_remotes();
      if (!remotes) return report(remotes.error());
      auto all = remotes->list();
      if (!all) return report(all.error());
      nlohmann::json out = nlohmann::json::array();
      for (const auto& [name, text] : *all) {
        auto link = parse_link(text);
        nlohmann::json row = {{"name", name}};
        if (link) {
          row["provider"] = link->provider.str();
          row["grant"] = link->grant_id;
          row["rendezvous"] = link->rendezvous ? nlohmann::json(link->rendezvous->str()) : nlohmann::json(nullptr);
          nlohmann::json cands = nlohmann::json::array();
          for (const auto& c : link->candidates) cands.push_back(c.str());
          row["candidates"] = cands;
        } else {
          row["error"] = link.error().what();
        }
        out.push_back(row);
      }
      if (*list_json) {
        print_json(out);
      } else if (out.empty()) {
        std::cout << "no saved remotes (add one with `runsnack remote add NAME -`)" << std::endl;
      } else {
        for (const auto& row : out)
          std::cout << row["name"].get<std::string>() << "  "
                    << (row.contains("provider") ? "provider " + row["provider"].get<std::string>() + "  grant " +
                                                       row["grant"].get<std::string>()
                                                 : "unreadable: " + row["error"].get<std::string>())
                    << std::endl;
      }
      return 0;
    });
  });

  auto remove_name = std::make_shared<std::string>();
  auto* remove = remote->add_subcommand("remove", "Forget a saved name");
  remove->add_option("NAME", *remove_name, "The saved name")->required();
  remove->callback([&status, remove_name] {
    run_command(status, [&] {
      auto remotes = open_remotes();
      if (!remotes) return report(remotes.error());
      auto removed = remotes->remove(*remove_name);
      if (!removed) return report(removed.error());
      if (!*removed) return report("no saved remote named '" + *remove_name + "'");
      std::cout << "removed '" << *remove_name << "'" << std::endl;
      return 0;
    });
  });
}

}  // namespace runsnack::cli
