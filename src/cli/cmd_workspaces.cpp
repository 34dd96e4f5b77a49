// `runsnack workspaces LINK`: your workspaces on the provider (one per project folder, or named
// with --workspace), with their sizes and last use; --remove NAME deletes one (the provider's
// side: services/exec/workspace_service.hpp).
#include "cli/command.hpp"
#include "cli/link_arg.hpp"
#include "cli/session_runner.hpp"
#include "cli/transfers.hpp"
#include "cli/workspace_arg.hpp"
#include "core/json_fields.hpp"
#include "core/printable.hpp"
#include "services/exec/exec_service.hpp"
#include "sandbox/workspace_names.hpp"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

struct WorkspacesArgs {
  std::string link;
  std::vector<std::string> remove;
  bool json = false;
};

// One request, answered by one control frame: under run, or under cp for a link that allows only cp.
asio::awaitable<Result<nlohmann::json>> ask(Session& session, const nlohmann::json& args) {
  auto stream = co_await open_mode(session, exec::kServiceRun, args);
  if (!stream && stream.error().what().find("does not allow") != std::string::npos)
    stream = co_await open_mode(session, exec::kServiceCp, args);
  if (!stream) co_return stream.error();
  auto answer = co_await fs::read_control(**stream);  // an error frame comes back as an error
  (void)co_await (*stream)->close_write();
  if (!answer && answer.error().what().starts_with("unknown "))
    co_return Error(errc::unsupported, "the provider runs an older RunSnack without named workspaces: update it");
  co_return answer;
}

void print_table(const nlohmann::json& answer, const std::string& here) {
  const auto& list = answer["workspaces"];
  // The provider's --disk-quota holds for the link: everyone who uses it fills the same room.
  const auto quota_line = [&] {
    if (!answer["quota_bytes"].is_number()) return;
    std::cout << "this link's " << human(answer["quota_bytes"].get<std::uint64_t>())
              << " disk quota is shared by everyone who uses the link";
    if (answer["quota_used_bytes"].is_number()) {
      std::cout << ": " << human(answer["quota_used_bytes"].get<std::uint64_t>()) << " used";
      if (answer["quota_used_bytes"].get<std::uint64_t>() > answer["quota_bytes"].get<std::uint64_t>())
        std::cout << ", over it: nothing runs until workspaces are removed (--remove NAME)";
    }
    std::cout << std::endl;
  };
  if (!list.is_array() || list.empty()) {
    std::cout << "no workspaces yet (runsnack run, shell or cp makes the one of a folder)" << std::endl;
    quota_line();
    return;
  }
  std::cout << std::left << std::setw(44) << "WORKSPACE" << std::setw(12) << "SIZE" << "LAST USED" << std::endl;
  std::uint64_t total = 0;
  for (const auto& w : list) {
    const std::string name = string_or(w, "name");
    const auto bytes = static_cast<std::uint64_t>(int_or(w, "bytes", 0));
    total += bytes;
    std::string notes;
    if (name == here) notes += " (this folder)";
    if (bool_or(w, "in_use", false)) notes += " (a command runs in it)";
    std::cout << std::setw(44) << printable(name) << std::setw(12) << human(bytes)
              << printable(string_or(w, "last_used")) << notes << std::endl;
  }
  std::cout << list.size() << " workspace" << (list.size() == 1 ? "" : "s") << ", " << human(total) << std::endl;
  quota_line();
}

asio::awaitable<int> workspaces_body(const WorkspacesArgs& args, Session& session) {
  const std::string here = exec::project_workspace_name(std::filesystem::current_path());
  if (args.remove.empty()) {
    const nlohmann::json request = {{"mode", "workspaces"}};
    auto answer = co_await ask(session, request);
    if (!answer) co_return report(answer.error());
    if ((*answer)["type"] != "workspaces") co_return report("expected the provider's list of workspaces");
    if (args.json) {
      nlohmann::json out = {{"workspaces", (*answer)["workspaces"]}, {"quota_bytes", (*answer)["quota_bytes"]},
                            {"quota_used_bytes", answer->value("quota_used_bytes", nlohmann::json())},
                            {"this_folder", here}};
      print_json(out);
    } else {
      print_table(*answer, here);
    }
    co_return 0;
  }
  nlohmann::json removed = nlohmann::json::array();
  for (const auto& name : args.remove) {
    const nlohmann::json request = {{"mode", "remove"}, {"name", name}};
    auto answer = co_await ask(session, request);
    if (!answer) co_return report(Error(answer.error().code, "cannot remove workspace " + name + ": " + answer.error().what()));
    removed.push_back(name);
    if (!args.json) std::cout << "removed workspace " << name << std::endl;
  }
  if (args.json) print_json({{"removed", removed}});
  co_return 0;
}

}  // namespace

void add_workspaces_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<WorkspacesArgs>();
  auto* cmd = app.add_subcommand("workspaces", "Your workspaces on the provider: sizes and last use; remove one");
  cmd->add_option("LINK", args->link, kLinkHelp);
  cmd->add_option("--remove", args->remove, "Delete this workspace and all its files on the provider (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--json", args->json, "Print one JSON object: workspaces [{name, bytes, last_used, in_use}], quota_bytes, "
                "quota_used_bytes (by everyone on the link), this_folder");
  cmd->footer("Each project folder has a workspace of its own on the provider, named after the folder and a\n"
              "hash of its path (marked \"this folder\"); run, shell and cp use it unless given --workspace NAME.\n"
              "A consumer of an earlier version had one workspace: its files are in \"default\". The provider's\n"
              "--disk-quota holds for the link: all the workspaces of everyone who uses it together (each sees\n"
              "only their own). A workspace a command runs in cannot be removed until the command ends.\n"
              "  runsnack workspaces gpu-box\n"
              "  runsnack workspaces gpu-box --remove old-experiment-1a2b3c4d");
  cmd->callback([&status, args] {
    for (const auto& name : args->remove)
      if (auto ok = exec::checked_workspace_name(name); !ok) {
        report(ok.error());
        status.code = kExitUsage;
        return;
      }
    run_command(status, [&] {
      SessionCommand command;
      command.link_arg = args->link;
      command.pipelined_proof = true;  // the first stream follows the proof
      command.body = [args](Session& session) -> asio::awaitable<int> { co_return co_await workspaces_body(*args, session); };
      return run_session_command(command);
    });
  });
}

}  // namespace runsnack::cli
