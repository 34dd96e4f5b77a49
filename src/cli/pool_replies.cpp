#include "cli/pool_replies.hpp"

#include "cli/text_column.hpp"
#include "core/json_fields.hpp"
#include "core/printable.hpp"

#include <cstdio>
#include <string>

namespace runsnack::cli {

namespace {

using nlohmann::json;

constexpr std::size_t kEntriesShown = 20;

std::string text_of(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return "-";
  const json& v = obj[key];
  return printable(v.is_string() ? v.get<std::string>() : v.dump());
}

std::string number(double v, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string verified_text(const json& job) {
  const json& v = job.contains("verification") ? job["verification"] : json();
  const std::string method = string_or(v, "method", "none");
  if (method == "none") return "-";
  std::string text = printable(method) + " " + std::to_string(int_or(v, "checked", 0)) + " ok";
  if (int_or(v, "rejected", 0) > 0) text += ", " + std::to_string(int_or(v, "rejected", 0)) + " rejected";
  if (int_or(v, "unverified", 0) > 0) text += ", " + std::to_string(int_or(v, "unverified", 0)) + " UNVERIFIED";
  return text;
}

void print_jobs(const json& jobs, std::ostream& out) {
  if (!jobs.is_array() || jobs.empty()) {
    out << "no jobs (submit one with `runsnack pool submit LINK exec --shards N -- COMMAND`)\n";
    return;
  }
  out << column("JOB", 22) << column("STATE", 10) << column("WORKLOAD", 9) << column("DONE", 10)
      << column("FAILED", 7) << column("SPENT / BUDGET", 22) << "CHECKS\n";
  for (const auto& j : jobs) {
    const std::string done = std::to_string(int_or(j, "done", 0)) + "/" + std::to_string(int_or(j, "tasks", 0));
    out << column(text_of(j, "job"), 22) << column(text_of(j, "state"), 10) << column(text_of(j, "workload"), 9)
        << column(done, 10) << column(std::to_string(int_or(j, "failed", 0)), 7)
        << column(text_of(j, "credits_spent") + " / " + text_of(j, "budget"), 22) << verified_text(j) << "\n";
    if (!string_or(j, "reason").empty()) out << "  reason: " << printable(string_or(j, "reason")) << "\n";
    if (j.contains("failures") && j["failures"].is_array())
      for (const auto& f : j["failures"])
        out << "  shard " << int_or(f, "shard", -1) << " exited " << int_or(f, "exit_code", 0)
            << (string_or(f, "stderr").empty() ? "" : ": " + printable(string_or(f, "stderr").substr(0, 200))) << "\n";
  }
}

void print_devices(const json& devices, std::ostream& out) {
  if (!devices.is_array() || devices.empty()) {
    out << "no workers have joined (on a worker: `runsnack pool join JOIN-LINK`)\n";
    return;
  }
  std::size_t online = 0;
  for (const auto& d : devices) online += d.value("online", false) ? 1 : 0;
  out << devices.size() << " device(s), " << online << " online\n";
  out << column("DEVICE", 22) << column("KIND", 16) << column("NAME", 22) << column("CAP", 7) << column("ONLINE", 7)
      << column("SCORE", 9)
      << column("PRICE/H", 9) << column("DONE", 6) << column("CHECKS", 12) << "NETWORK\n";
  for (const auto& d : devices) {
    const std::string checks =
        std::to_string(int_or(d, "valid", 0)) + " ok " + std::to_string(int_or(d, "invalid", 0)) + " bad";
    // A browser tab (webgpu, wasm) is marked apart: it comes and goes with its page.
    const std::string kind = text_of(d, "kind") + (d.value("browser", false) ? " browser" : "");
    const std::string cap = d.contains("max_task_seconds") && d["max_task_seconds"].is_number_integer()
                                ? std::to_string(d["max_task_seconds"].get<std::int64_t>()) + "s"
                                : "-";
    out << column(text_of(d, "id"), 22) << column(kind, 16) << column(text_of(d, "name"), 22) << column(cap, 7)
        << column(d.value("online", false) ? "yes" : "no", 7) << column(number(number_or(d, "score", 0.0), "%.2g"), 9)
        << column(number(number_or(d, "price", 0.0), "%g"), 9) << column(std::to_string(int_or(d, "tasks_done", 0)), 6)
        << column(checks, 12) << text_of(d, "network") << "\n";
    if (d.contains("excluded") && d["excluded"].is_string())
      out << "  excluded: " << printable(d["excluded"].get<std::string>()) << "\n";
  }
}

// Your trainings (pool/trainer.hpp): one line each, the last round's loss and accuracy.
void print_trainings(const json& trainings, std::ostream& out) {
  if (!trainings.is_array() || trainings.empty()) return;
  out << "\n" << column("TRAINING", 14) << column("STATE", 11) << column("ROUNDS", 9) << column("LOSS", 9)
      << column("ACCURACY", 10) << "CREDITS\n";
  for (const auto& t : trainings) {
    const json& metrics = t.contains("metrics") && t["metrics"].is_array() ? t["metrics"] : json::array();
    const json last = metrics.empty() ? json::object() : metrics.back();
    const std::string rounds = std::to_string(int_or(t, "rounds_done", 0)) + "/" +
                               std::to_string(t.contains("spec") ? int_or(t["spec"], "rounds", 0) : 0);
    out << column(text_of(t, "training"), 14) << column(text_of(t, "state"), 11) << column(rounds, 9)
        << column(last.contains("loss") && last["loss"].is_number() ? number(last["loss"].get<double>(), "%.4g") : "-", 9)
        << column(last.contains("accuracy") && last["accuracy"].is_number() ? number(last["accuracy"].get<double>(), "%.3f")
                                                                            : "-",
                  10)
        << text_of(t, "credits_spent") << "\n";
    if (!text_of(t, "reason").empty()) out << "  " << text_of(t, "reason") << "\n";
  }
}

void print_credits(const json& r, std::ostream& out) {
  out << "balance: " << text_of(r, "balance") << " credits (peer " << text_of(r, "peer") << ")\n";
  const json& entries = r.contains("entries") ? r["entries"] : json::array();
  if (!entries.is_array() || entries.empty()) {
    out << "no ledger entries yet (credits come from the coordinator's operator: `runsnack pool grant`)\n";
    return;
  }
  const std::size_t from = entries.size() > kEntriesShown ? entries.size() - kEntriesShown : 0;
  if (from > 0) out << "the last " << kEntriesShown << " of " << entries.size() << " entries (--json for all)\n";
  out << column("TXN", 8) << column("KIND", 9) << column("AMOUNT", 14) << "TASK\n";
  for (std::size_t i = from; i < entries.size(); ++i) {
    const json& e = entries[i];
    out << column(text_of(e, "txn"), 8) << column(text_of(e, "kind"), 9) << column(text_of(e, "amount"), 14)
        << text_of(e, "task") << "\n";
  }
}

}  // namespace

void print_pool_reply(std::string_view op, const json& reply, std::string_view job, std::ostream& out) {
  if (op == "cancel" && job.starts_with("t")) {
    out << "stopped training " << printable(job) << ": its running round stops, its weights so far stay "
        << "(pool submit LINK train --resume " << printable(job) << " --wait --out DIR fetches them)\n";
  } else if (op == "cancel") {
    out << "cancelled job " << printable(job) << ": its tasks stop and the unspent budget is back in your balance\n";
  } else if (op == "credits") {
    print_credits(reply, out);
  } else if (op == "status") {
    print_devices(reply.value("devices", json::array()), out);
    out << "\n";
    print_jobs(reply.value("jobs", json::array()), out);
    print_trainings(reply.value("trainings", json::array()), out);
  } else if (op == "jobs") {
    print_jobs(reply.value("jobs", json::array()), out);
    print_trainings(reply.value("trainings", json::array()), out);
  } else {
    out << reply.dump(2) << "\n";
  }
}

}  // namespace runsnack::cli
