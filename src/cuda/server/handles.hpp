// Per-connection table of the opaque handles a client sees for contexts,
// modules, functions, libraries, kernels, streams and events. A handle is
// checked against its kind on every use, so a forged or stale handle is
// CUDA_ERROR_INVALID_HANDLE and never reaches the driver.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace runsnack::cuda {

enum class Kind : std::uint8_t { Context, PrimaryContext, Module, Function, Library, Kernel, Stream, Event };

class HandleTable {
 public:
  struct Entry {
    Kind kind;
    std::uint64_t value;  // the backend's handle
    std::uint64_t owner;  // the client handle of the context it was made in (0: none)
  };

  // Handles start high and step by 16, so they never equal the special
  // streams 0, 1 and 2 or a small integer a client might forge.
  std::uint64_t add(Kind kind, std::uint64_t value, std::uint64_t owner = 0);
  // The handle already given for this backend value and kind, if any.
  std::optional<std::uint64_t> find_value(Kind kind, std::uint64_t value) const;
  const Entry* get(std::uint64_t handle, Kind kind) const;
  bool remove(std::uint64_t handle, Kind kind);
  // Every live handle of one kind, newest first (the order to free them in).
  std::vector<std::pair<std::uint64_t, Entry>> of_kind(Kind kind) const;
  std::size_t size() const { return entries_.size(); }

 private:
  std::uint64_t next_ = 0x5eed0000;
  std::map<std::uint64_t, Entry> entries_;
};

}  // namespace runsnack::cuda
