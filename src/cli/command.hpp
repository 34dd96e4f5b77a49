#pragma once
// What every subcommand shares: how it is registered, how it reports errors,
// and how it reaches this installation's state.

#include "core/error.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

namespace runsnack::cli {

// This binary's version (the CMake project's).
inline constexpr const char* kVersion = RUNSNACK_VERSION;

// Exit codes: 0 ok, 1 the command failed, 2 bad usage.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Checks for numeric options that say what is wanted in words (CLI11's own
// PositiveNumber names a range up to a 309-digit number).
inline const CLI::Validator kPositiveNumber(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') return "expected a number, got '" + text + "'";
      if (!(v > 0)) return "must be 1 or more (leave the option out for no limit)";
      return "";
    },
    "NUMBER > 0", "POSITIVE");
inline const CLI::Validator kNonNegativeNumber(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') return "expected a number, got '" + text + "'";
      if (!(v >= 0)) return "must be 0 or more";
      return "";
    },
    "NUMBER >= 0", "NON-NEGATIVE");

// Subcommands set this from their callbacks; main returns it.
struct ExitStatus {
  int code = 0;
};

// Prints "runsnack: <message>" on stderr and returns kExitFailure.
int report(const Error& e);
int report(const std::string& message);

// Runs `body`, turning an uncaught exception into a reported failure.
void run_command(ExitStatus& status, const std::function<int()>& body);

void print_json(const nlohmann::json& j);  // one line on stdout, flushed

// Subcommand registration, one per file.
void add_id_command(CLI::App& app, ExitStatus& status);
void add_share_command(CLI::App& app, ExitStatus& status);
void add_grant_commands(CLI::App& app, ExitStatus& status);   // links, revoke, log
void add_session_commands(CLI::App& app, ExitStatus& status); // cmd_sessions.cpp: sessions, kick
void add_remote_command(CLI::App& app, ExitStatus& status);
void add_info_command(CLI::App& app, ExitStatus& status);
void add_cuda_server_command(CLI::App& app, ExitStatus& status);  // hidden
void add_gpus_command(CLI::App& app, ExitStatus& status);
void add_forward_command(CLI::App& app, ExitStatus& status);     // cmd_forward.cpp
void add_cuda_command(CLI::App& app, ExitStatus& status);        // cmd_cuda.cpp
void add_run_commands(CLI::App& app, ExitStatus& status);        // cmd_run.cpp: run, shell, cp (cmd_cp.cpp)
void add_workspaces_command(CLI::App& app, ExitStatus& status);  // cmd_workspaces.cpp
void add_rendezvous_command(CLI::App& app, ExitStatus& status);  // cmd_rendezvous.cpp
void add_pool_command(CLI::App& app, ExitStatus& status);        // cmd_pool.cpp: serve, join, submit, ...
void add_doctor_command(CLI::App& app, ExitStatus& status);      // cmd_doctor.cpp
void add_generate_command(CLI::App& app, ExitStatus& status);    // cmd_generate.cpp (hidden): completions, man pages

}  // namespace runsnack::cli
