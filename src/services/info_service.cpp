#include "services/info_service.hpp"

#include <openssl/evp.h>

#include "core/json_fields.hpp"
#include "gpu/gpu_info.hpp"
#include "gpu/host_info.hpp"
#include "gpu/info_json.hpp"
#include "services/common/cuda_availability.hpp"

#include <boost/asio/buffer.hpp>

#include <algorithm>
#include <vector>

namespace runsnack {

namespace asio = boost::asio;
using Steady = std::chrono::steady_clock;

nlohmann::json gpu_list_json(const GpuReport& report) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : report.gpus) {
    nlohmann::json j = g;
    j["driver_version"] = report.driver_version;
    j["cuda_version"] = report.cuda_version;
    gpus.push_back(std::move(j));
  }
  return gpus;
}

std::string gpu_note(const GpuReport& report, const char* where) {
  std::string note = report.note;
  // The gpu layer speaks of "this machine"; the consumer reads it about the provider.
  if (auto at = note.find("this machine"); at != std::string::npos) note.replace(at, 12, where);
  if (note.empty() && report.gpus.empty()) note = std::string("no NVIDIA GPU on ") + where;
  return note;
}

asio::awaitable<void> serve_info(MuxStream& stream, const Grant& grant) {
  nlohmann::json terms = grant_terms(grant, std::chrono::system_clock::now());
  // The label is the provider's own note (`share --label`): it stays here unless `--public-label`.
  if (!bool_or(field_or(grant.terms, kServiceInfo, nullptr), "public_label", false)) terms.erase("label");
  nlohmann::json body = {
      {"host", query_host()},
      {"gpu_report", query_gpus(grant.gpus)},
      {"grant", terms},
  };
  if (grant_allows_service(grant, kServiceCuda)) body["cuda"] = cuda_availability();
  if (co_await write_stream_message(stream, body)) (void)co_await stream.close_write();
}

const std::vector<std::uint8_t>& probe_pattern() {
  static const std::vector<std::uint8_t> block = [] {
    std::vector<std::uint8_t> b(64 * 1024);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>((i * 131 + (i >> 8)) & 0xff);
    return b;
  }();
  return block;
}

asio::awaitable<void> serve_probe(MuxStream& stream, const nlohmann::json& args) {
  if (auto it = args.find("bytes"); it != args.end() && it->is_number_unsigned()) {
    std::uint64_t left = std::min<std::uint64_t>(it->get<std::uint64_t>(), kMaxProbeBytes);
    const auto& block = probe_pattern();
    while (left > 0) {
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
      if (!co_await stream.write(asio::buffer(block.data(), n))) co_return;
      left -= n;
    }
    (void)co_await stream.close_write();
    co_return;
  }
  auto ms = std::chrono::milliseconds(int_or(args, "ms", kDefaultProbe.count()));
  ms = std::clamp(ms, std::chrono::milliseconds(1), kMaxProbe);
  static const std::vector<std::uint8_t> zeros(256 * 1024);
  auto end = Steady::now() + ms;
  for (std::uint64_t sent = 0; Steady::now() < end && sent < kMaxTimedProbeBytes; sent += zeros.size()) {
    if (!co_await stream.write(asio::buffer(zeros))) co_return;
  }
  (void)co_await stream.close_write();
}

asio::awaitable<Result<ProbeTransfer>> fetch_probe_bytes(Session& session, std::uint64_t bytes) {
  auto opened = Steady::now();
  StreamHeader header{kServiceProbe, {{"bytes", bytes}}};
  auto stream = co_await session.open(header);
  if (!stream) co_return stream.error();
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
  std::vector<std::uint8_t> buf(256 * 1024);
  ProbeTransfer t;
  Steady::time_point first{};
  for (;;) {
    auto n = co_await (*stream)->read_some(asio::buffer(buf));
    if (!n) co_return n.error();
    if (*n == 0) break;
    if (t.bytes == 0) {
      first = Steady::now();
      t.first_byte_ms = std::chrono::duration<double, std::milli>(first - opened).count();
    }
    EVP_DigestUpdate(md.get(), buf.data(), *n);
    t.bytes += *n;
  }
  t.seconds = std::chrono::duration<double>(Steady::now() - first).count();
  unsigned char digest[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(md.get(), digest, &len);
  static const char* hex = "0123456789abcdef";
  for (unsigned i = 0; i < len; ++i) t.sha256 += hex[digest[i] >> 4], t.sha256 += hex[digest[i] & 15];
  co_return t;
}

namespace {

asio::awaitable<Result<double>> measure_bandwidth_mbps(Session& session, std::chrono::milliseconds duration) {
  StreamHeader header{kServiceProbe, {{"ms", duration.count()}}};
  auto stream = co_await session.open(header);
  if (!stream) co_return stream.error();
  std::vector<std::uint8_t> buf(256 * 1024);
  std::uint64_t total = 0;
  Steady::time_point first{};
  // An older provider sends for the whole duration: stop reading at the bound all the same.
  while (total < kMaxTimedProbeBytes) {
    auto n = co_await (*stream)->read_some(asio::buffer(buf));
    if (!n) co_return n.error();
    if (*n == 0) break;
    if (total == 0) first = Steady::now();
    total += *n;
  }
  double seconds = std::chrono::duration<double>(Steady::now() - first).count();
  if (total == 0 || seconds <= 0) co_return 0.0;
  co_return static_cast<double>(total) * 8 / seconds / 1e6;
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> fetch_info(Session& session, InfoOptions options) {
  const StreamHeader header{kServiceInfo, nlohmann::json::object()};  // not a temporary: GCC 12 coroutine bug
  auto stream = co_await session.open(header);
  if (!stream) co_return stream.error();
  auto reply = co_await read_stream_message(**stream);
  if (!reply) co_return reply.error();
  // The reply is peer input: every part is checked before anyone prints it.
  auto host = host_info_from_json(field_or(*reply, "host", nullptr));
  if (!host) co_return fail(errc::malformed, "bad info reply (host): " + host.error().what());
  auto gpus = gpu_report_from_json(field_or(*reply, "gpu_report", nullptr));
  if (!gpus) co_return fail(errc::malformed, "bad info reply (gpus): " + gpus.error().what());
  auto grant = field_or(*reply, "grant", nullptr);
  if (!grant.is_object() || !grant.contains("id") || !grant["services"].is_array())
    co_return fail(errc::malformed, "bad info reply (grant)");
  nlohmann::json out = {{"host", *host}, {"gpus", gpu_list_json(*gpus)}, {"gpu_note", gpu_note(*gpus, "the provider")},
                        {"grant", grant}};
  if (auto c = reply->find("cuda"); c != reply->end() && c->is_object() && (*c)["available"].is_boolean()) {
    const auto text = [&](const char* key) { return string_or(*c, key).substr(0, 200); };
    out["cuda"] = {{"available", (*c)["available"].get<bool>()}, {"backend", text("backend")}, {"note", text("note")}};
  }

  std::vector<double> rtts;
  for (int i = 0; i < options.pings; ++i) {
    auto rtt = co_await session.mux().ping();
    if (!rtt) co_return rtt.error();
    rtts.push_back(std::chrono::duration<double, std::milli>(*rtt).count());
  }
  std::sort(rtts.begin(), rtts.end());
  std::optional<double> bandwidth;
  if (options.bandwidth) {
    auto measured = co_await measure_bandwidth_mbps(session, options.probe);
    if (!measured) co_return measured.error();
    bandwidth = *measured;
  }

  const auto& info = session.info();
  out["provider"] = info.peer.str();
  out["path"] = info.path;
  out["address"] = info.remote_address;
  out["setup_ms"] = std::chrono::duration<double, std::milli>(info.setup).count();
  out["rtt_ms"] = rtts.empty() ? 0.0 : rtts[rtts.size() / 2];
  if (bandwidth) out["bandwidth_mbps"] = *bandwidth;
  co_return out;
}

}  // namespace runsnack
