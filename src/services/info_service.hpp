#pragma once
// The info service: what the provider offers (host, GPUs, the grant's terms)
// and how good the path is (RTT, a short bandwidth probe).
//
//   stream "info":  provider -> {"host":HostInfo,"gpu_report":GpuReport,"grant":terms} then FIN
//                   (plus "cuda":{available,backend,note} when the grant allows cuda: common/cuda_availability.hpp)
//                   (gpu/info_json.hpp, link/grant.hpp)
//   stream "probe": consumer -> header args {"ms":N}; provider sends zero bytes
//                   for N ms (at most kMaxProbe) or kMaxTimedProbeBytes, whichever
//                   comes first, then FIN.
//                   Or args {"bytes":N} (at most kMaxProbeBytes): exactly N bytes
//                   of probe_pattern() repeated, then FIN; the consumer checks
//                   a SHA-256 (tests and benchmarks: `runsnack info --probe-bytes`).

#include "core/error.hpp"
#include "gpu/gpu_info.hpp"
#include "link/grant.hpp"
#include "session/session.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>

namespace runsnack {

inline constexpr const char* kServiceProbe = "probe";
inline constexpr std::chrono::milliseconds kMaxProbe{2000};
inline constexpr std::chrono::milliseconds kDefaultProbe{300};
// A timed probe's bytes, at most: enough to measure a path of a few Gbit/s (16 MiB is
// 134 ms at 1 Gbit/s) without an `info` costing the provider half a gigabyte on loopback.
inline constexpr std::uint64_t kMaxTimedProbeBytes = 16ull << 20;

// The GPUs as commands show them: GpuInfo fields plus driver_version and cuda_version.
nlohmann::json gpu_list_json(const GpuReport& report);
// Why the list is empty ("no NVIDIA GPU on <where>"), or the report's own note.
std::string gpu_note(const GpuReport& report, const char* where);

// Provider halves. `grant` is the session's grant as of now.
boost::asio::awaitable<void> serve_info(MuxStream& stream, const Grant& grant);
boost::asio::awaitable<void> serve_probe(MuxStream& stream, const nlohmann::json& args);

inline constexpr std::uint64_t kMaxProbeBytes = 16ull << 30;
// 64 KiB: byte i is (i * 131 + (i >> 8)) & 0xff.
const std::vector<std::uint8_t>& probe_pattern();

struct ProbeTransfer {
  std::uint64_t bytes = 0;
  std::string sha256;  // lower-case hex of what arrived
  double first_byte_ms = 0;  // from the stream's open
  double seconds = 0;        // first to last byte
};
boost::asio::awaitable<Result<ProbeTransfer>> fetch_probe_bytes(Session& session, std::uint64_t bytes);

struct InfoOptions {
  std::chrono::milliseconds probe = kDefaultProbe;
  int pings = 5;
  bool bandwidth = true;  // false: no probe (`info --watch` measures once), bandwidth_mbps omitted
};

// Consumer half: the provider's report plus the path's measurements, as one
// object with keys host, gpus, gpu_note, grant, provider, path, setup_ms,
// rtt_ms, bandwidth_mbps, and cuda when the grant allows it.
boost::asio::awaitable<Result<nlohmann::json>> fetch_info(Session& session, InfoOptions options = {});

}  // namespace runsnack
