#include "pool/training/npy_records.hpp"

#include <algorithm>
#include <cctype>

namespace runsnack::pool::training {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kMaxHeader = 1 << 16;
constexpr std::size_t kMaxDims = 16;

// The text after `'key':` up to the next top-level comma or the closing brace.
std::string_view value_of(std::string_view header, std::string_view key) {
  const std::string quoted = "'" + std::string(key) + "'";
  auto at = header.find(quoted);
  if (at == std::string_view::npos) return {};
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (!rest.empty() && rest.front() == '(') {
    const auto close = rest.find(')');
    return close == std::string_view::npos ? std::string_view() : rest.substr(0, close + 1);
  }
  const auto end = rest.find_first_of(",}");
  return end == std::string_view::npos ? std::string_view() : rest.substr(0, end);
}

}  // namespace

Result<NpyLayout> parse_npy_layout(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) return fail(errc::malformed, "not a .npy file");
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail(errc::malformed, "a truncated .npy header");
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    start = 12;
  } else {
    return fail(errc::malformed, ".npy version " + std::to_string(major) + " is not known");
  }
  if (header_len > kMaxHeader || start + header_len > bytes.size()) return fail(errc::malformed, "a truncated .npy header");
  const std::string_view header = bytes.substr(start, header_len);
  NpyLayout out;
  out.data_offset = start + header_len;
  std::string_view descr = value_of(header, "descr");
  if (descr.size() < 4 || descr.front() != '\'' || descr.back() != '\'') return fail(errc::malformed, ".npy without a dtype");
  out.descr = std::string(descr.substr(1, descr.size() - 2));
  // Fixed-size numbers only: '<f4', '|u1', '>i8', 'b1'...; no objects, strings or records.
  const std::string& d = out.descr;
  std::size_t i = (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=') ? 1 : 0;
  if (i >= d.size() || std::string_view("fiub").find(d[i]) == std::string_view::npos)
    return fail(errc::malformed, "dtype '" + d.substr(0, 20) + "' is not a number type");
  const std::string digits = d.substr(i + 1);
  if (digits.empty() || digits.size() > 2 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return fail(errc::malformed, "dtype '" + d.substr(0, 20) + "' has no item size");
  out.item_bytes = static_cast<std::size_t>(std::stoi(digits));
  if (out.item_bytes == 0 || out.item_bytes > 16) return fail(errc::malformed, "dtype '" + d.substr(0, 20) + "': bad item size");
  const std::string_view order = value_of(header, "fortran_order");
  if (order.find("False") == std::string_view::npos) return fail(errc::malformed, ".npy in Fortran order (save it C-ordered)");
  std::string_view shape = value_of(header, "shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') return fail(errc::malformed, ".npy without a shape");
  shape = shape.substr(1, shape.size() - 2);
  std::uint64_t count = 1;
  while (!shape.empty()) {
    while (!shape.empty() && (shape.front() == ' ' || shape.front() == ',')) shape.remove_prefix(1);
    if (shape.empty()) break;
    std::size_t n = 0;
    while (n < shape.size() && std::isdigit(static_cast<unsigned char>(shape[n]))) ++n;
    if (n == 0 || n > 12) return fail(errc::malformed, ".npy with a bad shape");
    const std::int64_t dim = std::stoll(std::string(shape.substr(0, n)));
    shape.remove_prefix(n);
    out.shape.push_back(dim);
    if (out.shape.size() > kMaxDims) return fail(errc::malformed, ".npy with too many dimensions");
    count *= static_cast<std::uint64_t>(dim);
    if (count > bytes.size()) return fail(errc::malformed, ".npy shape larger than its file");
  }
  if (out.shape.empty()) return fail(errc::malformed, "a .npy scalar has no records");
  if (count * out.item_bytes != bytes.size() - out.data_offset)
    return fail(errc::malformed, ".npy values do not fill the file (" + std::to_string(bytes.size() - out.data_offset) +
                                     " bytes for " + std::to_string(count) + " items)");
  return out;
}

Result<std::string> npy_rows(std::string_view bytes, const NpyLayout& layout, std::int64_t begin, std::int64_t end) {
  if (begin < 0 || end < begin || end > layout.shape[0]) return fail(errc::invalid_argument, "rows out of range");
  std::size_t row_bytes = layout.item_bytes;
  for (std::size_t i = 1; i < layout.shape.size(); ++i) row_bytes *= static_cast<std::size_t>(layout.shape[i]);
  std::string shape = "(" + std::to_string(end - begin) + ",";
  for (std::size_t i = 1; i < layout.shape.size(); ++i) shape += (i > 1 ? ", " : " ") + std::to_string(layout.shape[i]);
  shape += ")";
  std::string header = "{'descr': '" + layout.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Padded with spaces and a newline so that the values start 64-aligned, as NumPy writes it.
  const bool v2 = header.size() + 11 > 0xffff;
  const std::size_t prefix = v2 ? 12 : 10;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const std::size_t n = header.size();
  for (std::size_t i = 0; i < (v2 ? 4u : 2u); ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header;
  const std::size_t from = layout.data_offset + static_cast<std::size_t>(begin) * row_bytes;
  out.append(bytes.substr(from, static_cast<std::size_t>(end - begin) * row_bytes));
  return out;
}

}  // namespace runsnack::pool::training
