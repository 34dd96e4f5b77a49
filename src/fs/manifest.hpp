#pragma once
// A tree as one side of a sync sees it, and what must travel. The wire form
// is the payload of one `manifest` frame (frame.hpp), binary, big-endian:
//
//   "RSM2"  u32 count  then `count` entries:
//     u8 kind         0 file, 1 folder, 2 symlink; file | 0x80: executable
//     u16 path_len    path bytes (path_rules.hpp)
//     file:    u64 size, 32 bytes content digest (content_digest.hpp: SHA-256 for files up to
//              256 KiB, chunked above, so that holes cost nothing)
//     symlink: u16 target_len (1 to kMaxPathBytes), target bytes (no NUL)
//
// parse_manifest() checks every path (path_rules.hpp), sizes, the count,
// duplicates, link targets' bounds and trailing bytes; what fails is errc::malformed /
// invalid_argument / too_large. Where a link may point is the receiver's policy
// (transfer.hpp ReceiveLimits), not the format's. manifest_digest() names a manifest (SHA-256
// of its wire form, hex). Pure: no filesystem access.

#include "core/error.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace runsnack::fs {

inline constexpr std::size_t kMaxManifestEntries = 200000;
inline constexpr std::uint64_t kMaxFileBytes = std::uint64_t(1) << 44;  // 16 TiB

enum class EntryType { file, dir, link };

struct Entry {
  std::string path;
  EntryType type = EntryType::file;
  std::uint64_t size = 0;
  bool executable = false;
  std::string sha256;  // content digest (content_digest.hpp), lowercase hex, files only
  std::string target;  // links only
  bool operator==(const Entry&) const = default;
};

std::vector<std::uint8_t> encode_manifest(const std::vector<Entry>& entries);
Result<std::vector<Entry>> parse_manifest(std::span<const std::uint8_t> wire);
std::string manifest_digest(std::span<const std::uint8_t> wire);

// The files of `wanted` whose content `have` lacks (missing, other hash, or
// another type), in `wanted`'s order. Folders and links never need data.
std::vector<std::string> files_to_fetch(const std::vector<Entry>& wanted, const std::map<std::string, Entry>& have);

std::uint64_t total_file_bytes(const std::vector<Entry>& entries);

// The first entry that is neither one of `asked`, inside one of them, nor a folder above one:
// what a receiver that asked for those paths (cp get, run --pull) must not write. Nothing when
// every entry is one of these.
std::optional<std::string> first_unasked(const std::vector<Entry>& entries, const std::vector<std::string>& asked);

// 64 hex digits <-> 32 bytes.
bool hex_to_bytes(std::string_view hex, std::uint8_t* out, std::size_t n);
std::string bytes_to_hex(const std::uint8_t* data, std::size_t n);

}  // namespace runsnack::fs
