// The answer to cudart's driver integrity check (export table d4082055-...):
// since CUDA 12.x the runtime asks the driver for a keyed digest of the
// process, the driver's own tables and the devices, and refuses to start
// (cudaErrorSoftwareValidityNotEstablished) unless it matches its own. The
// digest is HMAC (RFC 2104) over MD2 (RFC 1319) with a fixed 16-byte key, as
// publicly documented by the ZLUDA project's reverse engineering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace runsnack::cuda::shim {

// MD2 of `n` bytes (RFC 1319).
void md2(const std::uint8_t* data, std::size_t n, std::uint8_t out[16]);

struct IntegrityDevice {
  std::uint8_t uuid[16];
  std::int32_t pci_domain, pci_bus, pci_device;
};

struct IntegrityInput {
  std::uint32_t version;  // as cudart passes it (13000, 13001, 13002, ...)
  std::uint64_t unix_seconds;
  std::uint32_t driver_version;
  std::uint32_t process;
  std::uint32_t thread;
  const void* integrity_table;
  const void* cudart_table;
  const void* function;  // the integrity-check entry itself
  std::vector<IntegrityDevice> devices;
};

void integrity_digest(const IntegrityInput& in, std::uint64_t out[2]);

}  // namespace runsnack::cuda::shim
