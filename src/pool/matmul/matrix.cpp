#include "pool/matmul/matrix.hpp"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace runsnack::pool::matmul {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

float seeded_entry(std::uint64_t seed, char which, std::int64_t n, std::int64_t r, std::int64_t c) {
  std::uint64_t h = mix(seed ^ mix(static_cast<std::uint64_t>(which)) ^ mix(static_cast<std::uint64_t>(r * n + c) + 1));
  return static_cast<float>(static_cast<double>(h >> 40) / static_cast<double>(1ull << 23) - 1.0);
}

Matrix seeded_block(std::uint64_t seed, char which, std::int64_t n, std::int64_t row0, std::int64_t rows,
                    std::int64_t col0, std::int64_t cols) {
  Matrix m{rows, cols, std::vector<float>(static_cast<std::size_t>(rows * cols))};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      m.data[static_cast<std::size_t>(r * cols + c)] = seeded_entry(seed, which, n, row0 + r, col0 + c);
  return m;
}

Matrix sub_block(const Matrix& m, std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols) {
  Matrix out{rows, cols, std::vector<float>(static_cast<std::size_t>(rows * cols))};
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(&out.data[static_cast<std::size_t>(r * cols)], &m.data[static_cast<std::size_t>((row0 + r) * m.cols + col0)],
                static_cast<std::size_t>(cols) * sizeof(float));
  return out;
}

Matrix multiply(const Matrix& a, const Matrix& b) {
  Matrix c{a.rows, b.cols, std::vector<float>(static_cast<std::size_t>(a.rows * b.cols))};
  if (a.rows == 0 || b.cols == 0 || a.cols == 0) return c;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(a.rows), static_cast<int>(b.cols),
              static_cast<int>(a.cols), 1.0f, a.data.data(), static_cast<int>(a.cols), b.data.data(),
              static_cast<int>(b.cols), 0.0f, c.data.data(), static_cast<int>(c.cols));
  return c;
}

Matrix freivalds_vectors(std::uint64_t secret, std::int64_t n, int rounds) {
  Matrix r{n, rounds, std::vector<float>(static_cast<std::size_t>(n * rounds))};
  for (std::int64_t i = 0; i < n * rounds; ++i)
    r.data[static_cast<std::size_t>(i)] = (mix(secret ^ mix(static_cast<std::uint64_t>(i))) & 1) ? 1.0f : 0.0f;
  return r;
}

FreivaldsOutcome freivalds_check(const Matrix& a_rows, const Matrix& b_cols, const Matrix& c, const Matrix& r,
                                 const Matrix& br_in, double tolerance) {
  FreivaldsOutcome out;
  if (c.rows != a_rows.rows || c.cols != b_cols.cols || a_rows.cols != b_cols.rows || r.rows != c.cols) return out;
  const Matrix br = br_in.data.empty() ? multiply(b_cols, r) : br_in;  // n x k
  const Matrix abr = multiply(a_rows, br);                              // b x k
  const Matrix cr = multiply(c, r);                                     // b x k
  // Float32 sums of n products of entries in [-1,1) carry rounding of about
  // sqrt(n) ulps of their magnitude; scale the tolerance by it.
  const double scale = std::sqrt(static_cast<double>(std::max<std::int64_t>(a_rows.cols, 1))) *
                       std::sqrt(static_cast<double>(std::max<std::int64_t>(c.cols, 1)));
  for (std::size_t i = 0; i < cr.data.size(); ++i) {
    double err = std::fabs(static_cast<double>(cr.data[i]) - static_cast<double>(abr.data[i])) / scale;
    if (!(err == err)) err = INFINITY;  // NaN in a result is wrong, not "within tolerance"
    out.max_error = std::max(out.max_error, err);
  }
  out.accepted = out.max_error <= tolerance;
  return out;
}

// --- .npy ---------------------------------------------------------------------

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

std::string to_bytes(const Matrix& m) {
  static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");
  return {reinterpret_cast<const char*>(m.data.data()), m.data.size() * sizeof(float)};
}

Result<Matrix> from_bytes(std::string_view bytes, std::int64_t rows, std::int64_t cols) {
  if (rows < 0 || cols < 0 || bytes.size() != static_cast<std::size_t>(rows * cols) * sizeof(float))
    return fail(errc::malformed, "a block of " + std::to_string(rows) + "x" + std::to_string(cols) + " needs " +
                                     std::to_string(rows * cols * 4) + " bytes, got " + std::to_string(bytes.size()));
  Matrix m{rows, cols, std::vector<float>(static_cast<std::size_t>(rows * cols))};
  if (!bytes.empty()) std::memcpy(m.data.data(), bytes.data(), bytes.size());
  return m;
}

}  // namespace runsnack::pool::matmul
