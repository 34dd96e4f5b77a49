#include "gpu/info_json.hpp"

#include <algorithm>
#include <limits>
#include <string_view>

namespace runsnack {
namespace {

using nlohmann::json;

// Reads fields of one JSON object, remembering the first problem, so each
// from_json reads as a list of fields and checks once at the end.
class FieldReader {
 public:
  FieldReader(const json& j, const char* what) : j_(j), what_(what) {
    if (!j.is_object()) error_ = fail(errc::malformed, std::string(what) + ": not an object");
  }

  void string(const char* key, std::string& out, std::size_t max_bytes) {
    const json* v = field(key);
    if (!v) return;
    if (!v->is_string()) return bad(key, "not a string");
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > max_bytes)
      return set(fail(errc::too_large, std::string(what_) + "." + key + ": longer than " +
                                           std::to_string(max_bytes) + " bytes"));
    out = s;
  }

  void boolean(const char* key, bool& out) {
    const json* v = field(key);
    if (!v) return;
    if (!v->is_boolean()) return bad(key, "not true or false");
    out = v->get<bool>();
  }

  void u64(const char* key, std::uint64_t& out) {
    const json* v = field(key);
    if (!v) return;
    // A non-negative integer parses as number_unsigned; anything else (negative, fractional) is wrong.
    if (!v->is_number_unsigned()) return bad(key, "not a non-negative integer");
    out = v->get<std::uint64_t>();
  }

  void integer(const char* key, int& out, int min, int max) {
    const json* v = field(key);
    if (!v) return;
    if (!v->is_number_integer()) return bad(key, "not an integer");
    bool in_range = v->is_number_unsigned() ? v->get<std::uint64_t>() <= static_cast<std::uint64_t>(max)
                                            : v->get<std::int64_t>() >= min && v->get<std::int64_t>() <= max;
    if (!in_range) return bad(key, "out of range");
    out = static_cast<int>(v->get<std::int64_t>());
  }

  const json* array(const char* key, std::size_t max_items) {
    const json* v = field(key);
    if (!v) return nullptr;
    if (!v->is_array()) {
      bad(key, "not a list");
      return nullptr;
    }
    if (v->size() > max_items) {
      set(fail(errc::too_large, std::string(what_) + "." + key + ": more than " + std::to_string(max_items)));
      return nullptr;
    }
    return v;
  }

  void set(Error e) {
    if (!error_) error_ = std::move(e);
  }
  const std::optional<Error>& error() const { return error_; }

 private:
  const json* field(const char* key) {
    if (error_) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) {
      set(fail(errc::malformed, std::string(what_) + ": missing \"" + key + "\""));
      return nullptr;
    }
    return &*it;
  }
  void bad(const char* key, const char* why) {
    set(fail(errc::malformed, std::string(what_) + "." + key + ": " + why));
  }

  const json& j_;
  const char* what_;
  std::optional<Error> error_;
};

constexpr int kIntMax = std::numeric_limits<int>::max();

// Length of the valid UTF-8 sequence at text[i], 0 when invalid.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  auto c = static_cast<unsigned char>(text[i]);
  std::size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  std::uint32_t code = n == 1 ? c : c & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    code = (code << 6) | (b & 0x3F);
  }
  static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMin[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

// What we send must be what the peer's from_json accepts: at most
// `max_bytes`, cut on a character boundary, and valid UTF-8 (a hostname or
// os-release with stray bytes would otherwise make serialization throw).
std::string wire_text(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = utf8_length(text, i);
    std::string_view piece = n ? text.substr(i, n) : std::string_view("?");
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += n ? n : 1;
  }
  return out;
}

int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

}  // namespace

void to_json(json& j, const HostInfo& h) {
  j = json{{"hostname", wire_text(h.hostname, kInfoStringMaxBytes)},
           {"os", wire_text(h.os, kInfoStringMaxBytes)},
           {"kernel", wire_text(h.kernel, kInfoStringMaxBytes)},
           {"cpu_model", wire_text(h.cpu_model, kInfoStringMaxBytes)},
           {"cpu_count", std::max(h.cpu_count, 0)},
           {"ram_total", h.ram_total},
           {"ram_available", h.ram_available}};
}

void to_json(json& j, const GpuInfo& g) {
  j = json{{"index", std::max(g.index, 0)},
           {"name", wire_text(g.name, kInfoStringMaxBytes)},
           {"uuid", wire_text(g.uuid, kInfoStringMaxBytes)},
           {"memory_total", g.memory_total},
           {"memory_used", g.memory_used},
           {"utilization_pct", clamp(g.utilization_pct, -1, 100)},
           {"temperature_c", std::max(g.temperature_c, -1)}};
}

void to_json(json& j, const GpuReport& r) {
  // Only the first kMaxGpus: more would make the peer refuse the whole reply.
  json gpus = json::array();
  for (std::size_t i = 0; i < r.gpus.size() && i < kMaxGpus; ++i) gpus.push_back(r.gpus[i]);
  j = json{{"nvml_loaded", r.nvml_loaded},
           {"driver_version", wire_text(r.driver_version, kInfoStringMaxBytes)},
           {"cuda_version", wire_text(r.cuda_version, kInfoStringMaxBytes)},
           {"gpus", std::move(gpus)},
           {"note", wire_text(r.note, kInfoNoteMaxBytes)}};
}

Result<HostInfo> host_info_from_json(const json& j) {
  HostInfo h;
  FieldReader r(j, "host");
  r.string("hostname", h.hostname, kInfoStringMaxBytes);
  r.string("os", h.os, kInfoStringMaxBytes);
  r.string("kernel", h.kernel, kInfoStringMaxBytes);
  r.string("cpu_model", h.cpu_model, kInfoStringMaxBytes);
  r.integer("cpu_count", h.cpu_count, 0, kIntMax);
  r.u64("ram_total", h.ram_total);
  r.u64("ram_available", h.ram_available);
  if (r.error()) return *r.error();
  return h;
}

Result<GpuInfo> gpu_info_from_json(const json& j) {
  GpuInfo g;
  FieldReader r(j, "gpu");
  r.integer("index", g.index, 0, kIntMax);
  r.string("name", g.name, kInfoStringMaxBytes);
  r.string("uuid", g.uuid, kInfoStringMaxBytes);
  r.u64("memory_total", g.memory_total);
  r.u64("memory_used", g.memory_used);
  r.integer("utilization_pct", g.utilization_pct, -1, 100);
  r.integer("temperature_c", g.temperature_c, -1, kIntMax);
  if (r.error()) return *r.error();
  return g;
}

Result<GpuReport> gpu_report_from_json(const json& j) {
  GpuReport report;
  FieldReader r(j, "gpu report");
  r.boolean("nvml_loaded", report.nvml_loaded);
  r.string("driver_version", report.driver_version, kInfoStringMaxBytes);
  r.string("cuda_version", report.cuda_version, kInfoStringMaxBytes);
  r.string("note", report.note, kInfoNoteMaxBytes);
  if (const json* gpus = r.array("gpus", kMaxGpus)) {
    for (const json& item : *gpus) {
      auto gpu = gpu_info_from_json(item);
      if (!gpu) {
        r.set(gpu.error());
        break;
      }
      report.gpus.push_back(std::move(*gpu));
    }
  }
  if (r.error()) return *r.error();
  return report;
}

}  // namespace runsnack
