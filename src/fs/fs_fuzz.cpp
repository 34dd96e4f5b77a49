// libFuzzer target for what the sync reads from a peer: frame headers,
// control frames, manifests (runsnack_fuzzer; scripts/run-fuzzers), and the
// paths a peer names (cp, --pull) resolved against symlinks: the input's first
// line is the path, each further "link=target" line a symlink of the tree.
#include "fs/frame.hpp"
#include "fs/manifest.hpp"
#include "fs/path_rules.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

namespace {

void resolve_named_path(std::string_view text) {
  using namespace runsnack::fs;
  const std::size_t eol = text.find('\n');
  const std::string_view path = text.substr(0, eol);
  std::map<std::string, std::string, std::less<>> links;
  for (std::size_t at = eol; at != std::string_view::npos && links.size() < 64;) {
    const std::size_t next = text.find('\n', at + 1);
    const std::string_view line = text.substr(at + 1, next == std::string_view::npos ? next : next - at - 1);
    if (const std::size_t eq = line.find('='); eq != std::string_view::npos)
      links.emplace(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
    at = next;
  }
  const LinkLookup link_of = [&](const std::string& p) -> std::optional<std::string> {
    auto it = links.find(p);
    return it == links.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  for (bool follow_last : {false, true}) {
    auto resolved = resolve_inside(path, link_of, follow_last);
    // What resolves is a plain path inside the root (or the root itself).
    if (resolved && !resolved->empty() && !split_relative_path(*resolved)) std::abort();
    if (resolved && !split_relative_path(path)) std::abort();
  }
  if (auto parts = split_relative_path(path); parts && !links.empty())
    (void)symlink_resolves_inside(path, links.begin()->second, link_of);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace runsnack::fs;
  if (size >= kFrameHeaderBytes) {
    std::span<const std::uint8_t, kFrameHeaderBytes> head(data, kFrameHeaderBytes);
    (void)decode_frame_header(head);
  }
  std::span<const std::uint8_t> all(data, size);
  (void)decode_control(all);
  if (auto entries = parse_manifest(all)) (void)first_unasked(*entries, {"out", "a/b/c"});
  (void)decompress(all);
  resolve_named_path(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
