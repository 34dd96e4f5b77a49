// NumPy's .npy format for float32 matrices: parse_npy and encode_npy (matrix.hpp).
#include "pool/matmul/matrix.hpp"

#include <string>

namespace runsnack::pool::matmul {

namespace {
constexpr std::string_view kMagic = "\x93NUMPY";

// Finds `'key': value` in the header dict and returns value's text up to the
// next top-level ',' or '}'.
Result<std::string_view> dict_value(std::string_view header, std::string_view key) {
  std::string quoted = "'" + std::string(key) + "'";
  auto k = header.find(quoted);
  if (k == std::string_view::npos) return fail(errc::malformed, ".npy header has no " + quoted);
  auto colon = header.find(':', k + quoted.size());
  if (colon == std::string_view::npos) return fail(errc::malformed, ".npy header: no value for " + quoted);
  std::size_t start = colon + 1, depth = 0, i = start;
  for (; i < header.size(); ++i) {
    char ch = header[i];
    if (ch == '(') ++depth;
    else if (ch == ')') {
      if (depth == 0) break;
      --depth;
    } else if ((ch == ',' || ch == '}') && depth == 0) break;
  }
  auto v = header.substr(start, i - start);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

Result<std::int64_t> parse_dim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty() || s.size() > 9) return fail(errc::malformed, ".npy shape has a bad dimension");
  std::int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return fail(errc::malformed, ".npy shape has a bad dimension");
    v = v * 10 + (ch - '0');
  }
  return v;
}
}  // namespace

Result<Matrix> parse_npy(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) return fail(errc::malformed, "not a .npy file");
  auto major = static_cast<std::uint8_t>(bytes[6]);
  std::size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<std::uint8_t>(bytes[8]) | (static_cast<std::size_t>(static_cast<std::uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail(errc::malformed, ".npy header is truncated");
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<std::uint8_t>(bytes[8 + static_cast<std::size_t>(i)]);
    offset = 12;
  } else {
    return fail(errc::malformed, ".npy version " + std::to_string(major) + " is not supported");
  }
  if (header_len > 65536 || offset + header_len > bytes.size()) return fail(errc::malformed, ".npy header is truncated");
  std::string_view header = bytes.substr(offset, header_len);
  auto descr = dict_value(header, "descr");
  if (!descr) return descr.error();
  if (*descr != "'<f4'") return fail(errc::malformed, ".npy dtype must be float32 ('<f4'), not " + std::string(descr->substr(0, 20)));
  auto order = dict_value(header, "fortran_order");
  if (!order) return order.error();
  if (*order != "False") return fail(errc::malformed, ".npy must be in C order");
  auto shape = dict_value(header, "shape");
  if (!shape) return shape.error();
  if (shape->size() < 2 || shape->front() != '(' || shape->back() != ')')
    return fail(errc::malformed, ".npy shape is malformed");
  auto inner = shape->substr(1, shape->size() - 2);
  auto comma = inner.find(',');
  if (comma == std::string_view::npos) return fail(errc::malformed, ".npy must be a two-dimensional matrix");
  auto rest = inner.substr(comma + 1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == ',')) rest.remove_suffix(1);
  if (rest.find(',') != std::string_view::npos) return fail(errc::malformed, ".npy must be a two-dimensional matrix");
  auto rows = parse_dim(inner.substr(0, comma));
  if (!rows) return rows.error();
  auto cols = parse_dim(rest);
  if (!cols) return cols.error();
  std::string_view payload = bytes.substr(offset + header_len);
  if (*rows > 0 && *cols > (1ll << 32) / *rows) return fail(errc::too_large, ".npy matrix is too large");
  if (payload.size() != static_cast<std::size_t>(*rows * *cols) * sizeof(float))
    return fail(errc::malformed, ".npy data is " + std::to_string(payload.size()) + " bytes, the shape needs " +
                                     std::to_string(*rows * *cols * 4));
  return from_bytes(payload, *rows, *cols);
}

std::string encode_npy(const Matrix& m) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(m.rows) + ", " +
                     std::to_string(m.cols) + "), }";
  // Header padded with spaces and a newline so the data starts 64-aligned.
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out += to_bytes(m);
  return out;
}

}  // namespace runsnack::pool::matmul
