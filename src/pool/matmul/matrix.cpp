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

namespace {
// One 32-bit key per row, then a cheap integer hash per column, so a row
// of a block is made in a tight loop the compiler vectorises.
std::uint32_t row_key(std::uint64_t seed, char which, std::int64_t r) {
  return static_cast<std::uint32_t>(mix(seed ^ mix(static_cast<std::uint64_t>(which)) ^ mix(static_cast<std::uint64_t>(r) + 1)));
}
inline float entry_from(std::uint32_t key, std::uint32_t c) {
  std::uint32_t x = key ^ (c * 0x9e3779b9u);
  x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;  // lowbias32
  return static_cast<float>(static_cast<std::int32_t>(x >> 8)) * (1.0f / 8388608.0f) - 1.0f;
}

// One row of a block. Cloned for AVX-512 and AVX2 (picked at run time): 32-bit
// multiplies need it to vectorise, and making operands is a visible share
// of both the worker's task and the coordinator's check.
__attribute__((target_clones("avx512f", "avx2", "default"))) void fill_row(float* out, std::uint32_t key, std::uint32_t c0,
                                                                 std::int64_t cols) {
  for (std::int64_t c = 0; c < cols; ++c) out[c] = entry_from(key, c0 + static_cast<std::uint32_t>(c));
}
}  // namespace

float seeded_entry(std::uint64_t seed, char which, std::int64_t n, std::int64_t r, std::int64_t c) {
  (void)n;
  return entry_from(row_key(seed, which, r), static_cast<std::uint32_t>(c));
}

Matrix seeded_block(std::uint64_t seed, char which, std::int64_t n, std::int64_t row0, std::int64_t rows,
                    std::int64_t col0, std::int64_t cols) {
  (void)n;
  Matrix m{rows, cols, std::vector<float>(static_cast<std::size_t>(rows * cols))};
  for (std::int64_t r = 0; r < rows; ++r) {
    fill_row(&m.data[static_cast<std::size_t>(r * cols)], row_key(seed, which, row0 + r), static_cast<std::uint32_t>(col0), cols);
  }
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
  // Matrix-vector products (the check's) go to sgemv: sgemm would first
  // copy ("pack") the whole matrix for a single column.
  if (b.cols == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(a.rows), static_cast<int>(a.cols), 1.0f, a.data.data(),
                static_cast<int>(a.cols), b.data.data(), 1, 0.0f, c.data.data(), 1);
    return c;
  }
  if (a.rows == 1) {
    cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(b.rows), static_cast<int>(b.cols), 1.0f, b.data.data(),
                static_cast<int>(b.cols), a.data.data(), 1, 0.0f, c.data.data(), 1);
    return c;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(a.rows), static_cast<int>(b.cols),
              static_cast<int>(a.cols), 1.0f, a.data.data(), static_cast<int>(a.cols), b.data.data(),
              static_cast<int>(b.cols), 0.0f, c.data.data(), static_cast<int>(c.cols));
  return c;
}

Matrix freivalds_vectors(std::uint64_t secret, std::uint64_t stream, std::int64_t rows, int rounds) {
  const std::int64_t cols = std::max(rounds, 1) + 1;
  Matrix r{rows, cols, std::vector<float>(static_cast<std::size_t>(rows * cols))};
  const std::uint64_t key = mix(secret ^ mix(stream + 0x5bd1e995));
  for (std::int64_t i = 0; i < rows * cols; ++i)
    r.data[static_cast<std::size_t>(i)] = (mix(key ^ static_cast<std::uint64_t>(i)) & 1) ? 1.0f : 0.0f;
  return r;
}

Matrix transpose(const Matrix& m) {
  Matrix t{m.cols, m.rows, std::vector<float>(m.data.size())};
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t c = 0; c < m.cols; ++c) t.data[static_cast<std::size_t>(c * m.rows + r)] = m.at(r, c);
  return t;
}

namespace {
// The check's vector work is plain loops the compiler vectorises: BLAS
// would spread calls this small over threads and lose more than it gains.
void add_to(float* acc, const float* row, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) acc[c] += row[c];
}
float dot(const float* a, const float* b, std::int64_t n) {
  float lanes[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += a[i + j] * b[i + j];
  float sum = 0;
  for (float l : lanes) sum += l;
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}
// out (s.cols x width) += s' * rows, for 0/1 s: each row is added to the
// sums its bits select, so a pass over the rows costs additions only.
void add_selected_row(Matrix& out, const Matrix& s, std::int64_t r, const float* row) {
  for (std::int64_t p = 0; p < s.cols; ++p)
    if (s.at(r, p) != 0.0f) add_to(&out.data[static_cast<std::size_t>(p * out.cols)], row, out.cols);
}
Matrix selected_row_sums(const Matrix& s, const Matrix& rows) {
  Matrix out{s.cols, rows.cols, std::vector<float>(static_cast<std::size_t>(s.cols * rows.cols))};
  for (std::int64_t r = 0; r < rows.rows; ++r) add_selected_row(out, s, r, &rows.data[static_cast<std::size_t>(r * rows.cols)]);
  return out;
}
// One row of B_j * R_j: that row of B_j against every column of R_j (given as R_j').
void row_times(const float* row, const Matrix& rt, float* out) {
  for (std::int64_t p = 0; p < rt.rows; ++p) out[p] = dot(&rt.data[static_cast<std::size_t>(p * rt.cols)], row, rt.cols);
}
}  // namespace

Matrix left_side(const Matrix& s_i, const Matrix& a_rows) { return selected_row_sums(s_i, a_rows); }

Matrix right_side(const Matrix& b_cols, const Matrix& r_j) {
  const Matrix rt = transpose(r_j);
  Matrix out{b_cols.rows, r_j.cols, std::vector<float>(static_cast<std::size_t>(b_cols.rows * r_j.cols))};
  for (std::int64_t t = 0; t < b_cols.rows; ++t)
    row_times(&b_cols.data[static_cast<std::size_t>(t * b_cols.cols)], rt, &out.data[static_cast<std::size_t>(t * r_j.cols)]);
  return out;
}

Matrix seeded_left_side(std::uint64_t seed, std::int64_t n, std::int64_t row0, const Matrix& s_i) {
  Matrix out{s_i.cols, n, std::vector<float>(static_cast<std::size_t>(s_i.cols * n))};
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < s_i.rows; ++r) {
    fill_row(row.data(), row_key(seed, 'A', row0 + r), 0, n);
    add_selected_row(out, s_i, r, row.data());
  }
  return out;
}

Matrix seeded_right_side(std::uint64_t seed, std::int64_t n, std::int64_t col0, const Matrix& r_j) {
  const Matrix rt = transpose(r_j);
  Matrix out{n, r_j.cols, std::vector<float>(static_cast<std::size_t>(n * r_j.cols))};
  std::vector<float> row(static_cast<std::size_t>(r_j.rows));
  for (std::int64_t t = 0; t < n; ++t) {
    fill_row(row.data(), row_key(seed, 'B', t), static_cast<std::uint32_t>(col0), r_j.rows);
    row_times(row.data(), rt, &out.data[static_cast<std::size_t>(t * r_j.cols)]);
  }
  return out;
}

FreivaldsOutcome freivalds_check(const Matrix& s_i, const Matrix& r_j, const Matrix& left, const Matrix& right,
                                 const Matrix& c, double tolerance) {
  FreivaldsOutcome out;
  if (c.rows != s_i.rows || c.cols != r_j.rows || left.cols != right.rows || left.rows != s_i.cols ||
      right.cols != r_j.cols)
    return out;
  const Matrix lhs = multiply(selected_row_sums(s_i, c), r_j);  // (k+1) x (k+1), one pass over C
  const Matrix rhs = multiply(left, right);
  // Each compared number sums about (rows/2)*(cols/2) entries of C, each a
  // sum of n products of entries in [-1,1): its size grows like
  // sqrt(n) * sqrt(rows*cols) / 2; float32 rounding is relative to that.
  const double scale = std::sqrt(static_cast<double>(std::max<std::int64_t>(left.cols, 1))) *
                       std::sqrt(static_cast<double>(std::max<std::int64_t>(c.rows * c.cols, 1))) / 2;
  for (std::size_t i = 0; i < lhs.data.size(); ++i) {
    double err = std::fabs(static_cast<double>(lhs.data[i]) - static_cast<double>(rhs.data[i])) / scale;
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
