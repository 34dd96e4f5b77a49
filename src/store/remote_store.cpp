#include "store/remote_store.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/paths.hpp"

namespace runsnack {
namespace {

using nlohmann::json;
using Remotes = std::map<std::string, std::string, std::less<>>;

bool valid_link_text(std::string_view link) {
  if (link.empty() || link.size() > kRemoteLinkMaxBytes) return false;
  for (unsigned char c : link)
    if (c <= 0x20 || c == 0x7F) return false;
  return true;
}

Result<Remotes> load(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return Remotes{};
  auto text = read_file(file, kRemotesFileMaxBytes);
  if (!text) return text.error();
  json doc = json::parse(*text, nullptr, false);
  auto bad = [&](const std::string& why) { return fail(errc::malformed, file.string() + ": " + why); };
  if (!doc.is_object()) return bad("not a JSON object");
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() || version->get<std::int64_t>() != 1)
    return bad("unknown version (written by a newer RunSnack?)");
  auto remotes = doc.find("remotes");
  if (remotes == doc.end() || !remotes->is_object()) return bad("no \"remotes\" object");
  Remotes out;
  for (const auto& [name, link] : remotes->items()) {
    if (!valid_remote_name(name)) return bad("bad remote name \"" + name + "\"");
    if (!link.is_string() || !valid_link_text(link.get_ref<const std::string&>()))
      return bad("bad link for remote " + name);
    out.emplace(name, link.get<std::string>());
  }
  return out;
}

Result<void> save(const std::filesystem::path& file, const Remotes& remotes) {
  json doc{{"version", 1}, {"remotes", json::object()}};
  for (const auto& [name, link] : remotes) doc["remotes"][name] = link;
  return write_file_atomic(file, doc.dump(2) + "\n", 0600);
}

}  // namespace

bool valid_remote_name(std::string_view name) {
  if (name.empty() || name.size() > kRemoteNameMaxBytes) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<void> RemoteStore::add(std::string name, std::string link, bool replace) {
  if (!valid_remote_name(name))
    return fail(errc::invalid_argument, "bad remote name \"" + name.substr(0, kRemoteNameMaxBytes) +
                                            "\": use 1 to 64 of A-Z a-z 0-9 . _ -");
  if (!valid_link_text(link))
    return fail(errc::invalid_argument,
                "bad link for remote " + name + ": expected one link, without spaces");
  auto remotes = load(file_);
  if (!remotes) return remotes.error();
  auto [it, inserted] = remotes->try_emplace(name, link);
  if (!inserted) {
    if (!replace)
      return fail(errc::invalid_argument,
                  "remote " + name + " exists already (replace it to change its link)");
    it->second = std::move(link);
  }
  return save(file_, *remotes);
}

Result<bool> RemoteStore::remove(std::string_view name) {
  auto remotes = load(file_);
  if (!remotes) return remotes.error();
  auto it = remotes->find(name);
  if (it == remotes->end()) return false;
  remotes->erase(it);
  if (auto r = save(file_, *remotes); !r) return r.error();
  return true;
}

Result<std::optional<std::string>> RemoteStore::get(std::string_view name) {
  auto remotes = load(file_);
  if (!remotes) return remotes.error();
  auto it = remotes->find(name);
  if (it == remotes->end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Result<std::vector<std::pair<std::string, std::string>>> RemoteStore::list() {
  auto remotes = load(file_);
  if (!remotes) return remotes.error();
  return std::vector<std::pair<std::string, std::string>>(remotes->begin(), remotes->end());
}

}  // namespace runsnack
