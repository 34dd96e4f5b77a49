// The weights file (weights.hpp has the layout): parse_weights and encode_weights.
#include "pool/training/weights.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/printable.hpp"
#include "pool/wire.hpp"

namespace runsnack::pool::training {

namespace {
using json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";
// Containers below the top-level object: a tensor's entry, then its shape or
// offsets array. Anything deeper is not safetensors and is not built.
constexpr int kMaxJsonDepth = 2;

std::string named(std::string_view name) { return "'" + printable(name.substr(0, kMaxNameBytes)) + "'"; }

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::uint64_t read_u64_le(std::string_view b) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[static_cast<std::size_t>(i)]);
  return v;
}

void append_u64_le(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i) & 0xff);
}

void decode_f32_le(std::string_view bytes, std::vector<float>& out) {
  out.resize(bytes.size() / 4);
  if constexpr (std::endian::native == std::endian::little) {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::uint32_t u = 0;
      for (int k = 3; k >= 0; --k)
        u = u << 8 | static_cast<unsigned char>(bytes[i * 4 + static_cast<std::size_t>(k)]);
      out[i] = std::bit_cast<float>(u);
    }
  }
}

void append_f32_le(std::string& out, const std::vector<float>& values) {
  if constexpr (std::endian::native == std::endian::little) {
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  } else {
    for (float f : values) {
      const auto u = std::bit_cast<std::uint32_t>(f);
      for (int k = 0; k < 4; ++k) out += static_cast<char>(u >> (8 * k) & 0xff);
    }
  }
}

// A tensor's header entry, before its offsets are checked against the others.
struct Entry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

Result<Entry> read_entry(const std::string& name, const json& v, std::uint64_t data_size) {
  const std::string who = "tensor " + named(name);
  if (name.empty()) return fail(errc::malformed, "weights header has a tensor with an empty name");
  if (name.size() > kMaxNameBytes)
    return fail(errc::too_large, who + "...: name is " + std::to_string(name.size()) +
                                     " bytes, over the limit of " + std::to_string(kMaxNameBytes));
  if (!v.is_object()) return fail(errc::malformed, who + ": header entry is not an object");
  const auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string())
    return fail(errc::malformed, who + ": header entry has no \"dtype\"");
  if (*dtype != "F32")
    return fail(errc::malformed, who + " is " +
                                     printable(dtype->get_ref<const std::string&>().substr(0, 16)) +
                                     ": only float32 (F32) weights are accepted; convert before saving "
                                     "(tensor.float() in PyTorch, .astype(numpy.float32) in NumPy)");
  const auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array())
    return fail(errc::malformed, who + ": header entry has no \"shape\" list");
  if (shape->size() > kMaxRank)
    return fail(errc::too_large, who + " has rank " + std::to_string(shape->size()) + ", over the limit of " +
                                     std::to_string(kMaxRank));
  Entry e{name, {}, 0, 0};
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max())
      return fail(errc::malformed,
                  who + ": shape " + shape->dump().substr(0, 80) + " is not a list of sizes >= 0");
    e.shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
  }
  const auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    return fail(errc::malformed, who + ": \"data_offsets\" must be [begin, end], two byte offsets >= 0");
  e.begin = (*offsets)[0].get<std::uint64_t>();
  e.end = (*offsets)[1].get<std::uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    return fail(errc::malformed, who + ": data_offsets [" + std::to_string(e.begin) + ", " +
                                     std::to_string(e.end) + "] are not a range inside the " +
                                     std::to_string(data_size) + " bytes of data");
  // Counted up to what 64 bits hold, so the message can say how far off the data is.
  const std::int64_t count = element_count(e.shape, std::numeric_limits<std::uint64_t>::max() / 4);
  if (count < 0 || static_cast<std::uint64_t>(count) * 4 != e.end - e.begin)
    return fail(errc::malformed, who + ": shape " + shape_text(e.shape) + " holds " +
                                     (count < 0 ? std::string("too many values to count")
                                                : std::to_string(count) + " values") +
                                     " but its data is " + std::to_string(e.end - e.begin) + " bytes");
  return e;
}

// Sorted by begin, the ranges must tile [0, data_size): no overlap, no gap, nothing after.
Result<void> check_tiling(std::vector<Entry>& entries, std::uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  const Entry* previous = nullptr;
  for (const auto& e : entries) {
    if (e.begin < at)
      return fail(errc::malformed, "tensors " + named(previous->name) + " and " + named(e.name) +
                                       " overlap in the data (bytes " + std::to_string(e.begin) + " to " +
                                       std::to_string(at) + ")");
    if (e.begin > at)
      return fail(errc::malformed, "weights data has " + std::to_string(e.begin - at) +
                                       " bytes before tensor " + named(e.name) + " that no tensor owns");
    at = e.end;
    previous = &e;
  }
  if (at != data_size)
    return fail(
        errc::malformed,
        "weights data has " + std::to_string(data_size - at) +
            " bytes after the last tensor that no tensor owns (a truncated header, or a file cut short?)");
  return {};
}

}  // namespace

std::int64_t element_count(const std::vector<std::int64_t>& shape, std::uint64_t max_values) {
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; })) return -1;
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d == 0; })) return 0;
  std::uint64_t count = 1;
  for (auto d : shape) {
    const auto size = static_cast<std::uint64_t>(d);
    if (size > max_values / count) return -1;  // count * size > max_values, without overflowing
    count *= size;
  }
  if (count > max_values) return -1;
  return static_cast<std::int64_t>(count);
}

Result<Weights> parse_weights(std::string_view bytes, std::uint64_t max_data_bytes) {
  if (bytes.size() < 8)
    return fail(errc::malformed,
                "weights file is " + std::to_string(bytes.size()) +
                    " bytes, too short for its 8-byte header length (not a safetensors file?)");
  const std::uint64_t header_size = read_u64_le(bytes);
  if (header_size > kMaxHeaderBytes)
    return fail(errc::too_large, "weights header is " + std::to_string(header_size) +
                                     " bytes, over the limit of " + std::to_string(kMaxHeaderBytes) +
                                     " (not a safetensors file, or too many tensors?)");
  if (header_size > bytes.size() - 8)
    return fail(errc::malformed, "weights file is truncated: its header should be " +
                                     std::to_string(header_size) + " bytes but only " +
                                     std::to_string(bytes.size() - 8) + " follow");
  const std::string_view header_text = bytes.substr(8, header_size);
  const std::uint64_t data_size = bytes.size() - 8 - header_size;
  if (data_size > max_data_bytes)
    return fail(errc::too_large, "weights data is " + std::to_string(data_size) +
                                     " bytes, over this job's limit of " + std::to_string(max_data_bytes));
  if (header_text.empty() || header_text.front() != '{')
    return fail(errc::malformed, "weights header is not a JSON object (not a safetensors file?)");

  // The callback keeps deep values from being built and notices repeated
  // tensor names, which nlohmann would otherwise merge silently.
  bool too_deep = false;
  std::string repeated;
  std::set<std::string, std::less<>> names;
  const json header = json::parse(
      header_text,
      [&](int depth, json::parse_event_t event, json& parsed) {
        if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
            depth > kMaxJsonDepth) {
          too_deep = true;
          return false;
        }
        if (event == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
            !names.insert(parsed.get<std::string>()).second && repeated.empty())
          repeated = parsed.get<std::string>();
        return true;
      },
      /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return fail(errc::malformed, "weights header is not valid JSON (not a safetensors file?)");
  if (too_deep) return fail(errc::malformed, "weights header nests deeper than a safetensors header does");
  if (!repeated.empty())
    return fail(errc::malformed, "weights header names tensor " + named(repeated) + " twice");

  Weights out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object())
        return fail(errc::malformed, "weights header: \"__metadata__\" must be an object");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string())
          return fail(errc::malformed,
                      "weights header: \"__metadata__\" value " + named(mkey) + " is not a string");
        out.metadata.emplace(mkey, mvalue.get<std::string>());
      }
      continue;
    }
    if (entries.size() == kMaxTensors)
      return fail(errc::too_large, "weights file has more than " + std::to_string(kMaxTensors) + " tensors");
    auto entry = read_entry(key, value, data_size);
    if (!entry) return entry.error();
    entries.push_back(std::move(*entry));
  }
  if (auto tiled = check_tiling(entries, data_size); !tiled) return tiled.error();

  const std::string_view data = bytes.substr(8 + header_size);
  for (auto& e : entries) {
    Tensor t;
    t.shape = std::move(e.shape);
    decode_f32_le(data.substr(e.begin, e.end - e.begin), t.values);
    out.tensors.emplace(std::move(e.name), std::move(t));
  }
  return out;
}

Result<std::string> encode_weights(const Weights& weights, std::uint64_t max_data_bytes) {
  if (weights.tensors.size() > kMaxTensors)
    return fail(errc::too_large, "weights have " + std::to_string(weights.tensors.size()) +
                                     " tensors, over the limit of " + std::to_string(kMaxTensors));
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : weights.tensors) {
    const std::string who = "tensor " + named(name);
    if (name.empty() || name == kMetadataKey || valid_utf8(name) != name)
      return fail(errc::invalid_argument, who + ": a name must be non-empty UTF-8 and not \"__metadata__\"");
    if (name.size() > kMaxNameBytes)
      return fail(errc::too_large,
                  who + "...: name is over the limit of " + std::to_string(kMaxNameBytes) + " bytes");
    if (t.shape.size() > kMaxRank)
      return fail(errc::too_large, who + " has rank " + std::to_string(t.shape.size()) +
                                       ", over the limit of " + std::to_string(kMaxRank));
    const std::int64_t count = element_count(t.shape, std::numeric_limits<std::uint64_t>::max() / 4);
    if (count < 0 || static_cast<std::uint64_t>(count) != t.values.size())
      return fail(errc::invalid_argument, who + ": shape " + shape_text(t.shape) + " does not hold its " +
                                              std::to_string(t.values.size()) + " values");
    const std::uint64_t size = t.values.size() * 4;
    if (size > max_data_bytes - offset)
      return fail(errc::too_large, "weights data would pass the limit of " + std::to_string(max_data_bytes) +
                                       " bytes at " + who);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  if (!weights.metadata.empty()) {
    for (const auto& [key, value] : weights.metadata)
      if (valid_utf8(key) != key || valid_utf8(value) != value)
        return fail(errc::invalid_argument, "weights metadata " + named(key) + " is not UTF-8 text");
    header[std::string(kMetadataKey)] = weights.metadata;
  }
  // Names were checked as UTF-8 above, so "replace" never replaces; it only keeps dump() from throwing.
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8,
              ' ');  // the data starts 8-aligned, as the safetensors package writes it
  if (text.size() > kMaxHeaderBytes)
    return fail(errc::too_large, "weights header would be " + std::to_string(text.size()) +
                                     " bytes, over the limit of " + std::to_string(kMaxHeaderBytes));
  std::string out;
  out.reserve(8 + text.size() + offset);
  append_u64_le(out, text.size());
  out += text;
  for (const auto& [name, t] : weights.tensors) append_f32_le(out, t.values);
  return out;
}

}  // namespace runsnack::pool::training
