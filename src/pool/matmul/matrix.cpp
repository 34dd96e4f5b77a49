#include "pool/matmul/matrix.hpp"

#include "pool/matmul/blas.hpp"

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
    blas::sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(a.rows), static_cast<int>(a.cols), 1.0f, a.data.data(),
                static_cast<int>(a.cols), b.data.data(), 1, 0.0f, c.data.data(), 1);
    return c;
  }
  if (a.rows == 1) {
    blas::sgemv(CblasRowMajor, CblasTrans, static_cast<int>(b.rows), static_cast<int>(b.cols), 1.0f, b.data.data(),
                static_cast<int>(b.cols), a.data.data(), 1, 0.0f, c.data.data(), 1);
    return c;
  }
  blas::sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(a.rows), static_cast<int>(b.cols),
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
// The check's sums S' * X for a 0/1 matrix S (rows x m) are made by
// bucketing ("four Russians"): S's columns are cut into groups of up to 6,
// and within a strip of kStrip columns every row of X is added once per
// group, into the bucket of its 6-bit pattern; each output row is then the
// sum of the buckets whose pattern has its bit. For m = 11 (k = 10) that is
// 2 additions per entry of X instead of 5.5, on buckets near the core.
// Seeded operands are made strip by strip: 64 columns x 64 buckets x 2
// groups = 32 KiB of tables; measured on Zen 4 against 4- and 5-bit groups
// and strips of 16 to 256.
constexpr int kGroupBits = 6;
constexpr int kBuckets = 1 << kGroupBits;
constexpr std::int64_t kStrip = 64;

struct Patterns {
  std::int64_t m = 0;
  int groups = 0;
  std::vector<std::uint8_t> of;  // rows x groups: row r's bits in group g
};

Patterns patterns_of(const Matrix& s) {
  Patterns p{s.cols, static_cast<int>((s.cols + kGroupBits - 1) / kGroupBits), {}};
  p.of.assign(static_cast<std::size_t>(s.rows * p.groups), 0);
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (std::int64_t c = 0; c < s.cols; ++c)
      if (s.at(r, c) != 0.0f) p.of[static_cast<std::size_t>(r * p.groups + c / kGroupBits)] |= std::uint8_t(1u << (c % kGroupBits));
  return p;
}

// out (m x cols, row-major) = S' * X, a strip of `strip` columns (a
// multiple of 16) at a time; `row(r, c0, buf)` yields `strip` entries of X's
// row r from column c0 (zero past `cols`), either a pointer into X or `buf`
// filled.
template <class Row>
[[gnu::always_inline]] inline void selected_sums(const Patterns& p, std::int64_t rows, std::int64_t cols, std::int64_t strip,
                                                 Row&& row, float* out) {
  std::vector<float> tables(static_cast<std::size_t>(p.groups * kBuckets * strip)), buf(static_cast<std::size_t>(strip)),
      sum(static_cast<std::size_t>(strip));
  for (std::int64_t c0 = 0; c0 < cols; c0 += strip) {
    std::fill(tables.begin(), tables.end(), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* x = row(r, c0, buf.data());
      const std::uint8_t* pat = &p.of[static_cast<std::size_t>(r * p.groups)];
      for (int g = 0; g < p.groups; ++g) {
        float* t = &tables[static_cast<std::size_t>((g * kBuckets + pat[g]) * strip)];
        for (std::int64_t c = 0; c < strip; c += 16)
          for (std::int64_t l = 0; l < 16; ++l) t[c + l] += x[c + l];
      }
    }
    const std::int64_t width = std::min(strip, cols - c0);
    for (int g = 0; g < p.groups; ++g) {
      float* t = &tables[static_cast<std::size_t>(g * kBuckets * strip)];
      const int bits = static_cast<int>(std::min<std::int64_t>(kGroupBits, p.m - g * kGroupBits));
      // Top bit first: its output is the upper half's sum; folding the upper
      // half onto the lower leaves the buckets of the remaining bits.
      for (int bit = bits - 1; bit >= 0; --bit) {
        const std::int64_t half = std::int64_t{1} << bit;
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (std::int64_t i = 0; i < half; ++i)
          for (std::int64_t c = 0; c < strip; ++c) sum[static_cast<std::size_t>(c)] += t[(half + i) * strip + c], t[i * strip + c] += t[(half + i) * strip + c];
        std::copy_n(sum.begin(), width, out + (g * kGroupBits + bit) * cols + c0);
      }
    }
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void sums_of_matrix(const Patterns& p, const Matrix& x, float* out) {
  // Strips walk down the rows a page apart: fast while the matrix is in
  // cache, as a tile is on the coordinator right after it was decoded; from
  // DRAM (matmul_bench's first part) a 4 MiB tile pass takes several times
  // longer. Measured alternatives (tables for the whole width in L2, 11
  // dot products per row, a linear warm-up sweep) were slower.
  selected_sums(p, x.rows, x.cols, kStrip, [&](std::int64_t r, std::int64_t c0, float* buf) -> const float* {
    const float* src = &x.data[static_cast<std::size_t>(r * x.cols + c0)];
    if (c0 + kStrip <= x.cols) return src;
    std::fill_n(buf, kStrip, 0.0f);
    std::copy_n(src, x.cols - c0, buf);
    return buf;
  }, out);
}

// X = rows [row0, row0 + rows) of a seeded matrix, all n columns.
__attribute__((target_clones("avx512f", "avx2", "default"))) void sums_of_seeded_rows(const Patterns& p, std::uint64_t seed, char which,
                                                                             std::int64_t row0, std::int64_t rows, std::int64_t n,
                                                                             float* out) {
  std::vector<std::uint32_t> keys(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) keys[static_cast<std::size_t>(r)] = row_key(seed, which, row0 + r);
  selected_sums(p, rows, n, kStrip, [&](std::int64_t r, std::int64_t c0, float* buf) -> const float* {
    const std::uint32_t key = keys[static_cast<std::size_t>(r)];
    for (std::int64_t c = 0; c < kStrip; ++c) buf[c] = entry_from(key, static_cast<std::uint32_t>(c0 + c));
    if (c0 + kStrip > n) std::fill(buf + (n - c0), buf + kStrip, 0.0f);
    return buf;
  }, out);
}

// X = the transpose of columns [col0, col0 + cols) of a seeded n x n matrix:
// X's row r is column col0 + r, made across the matrix's rows.
__attribute__((target_clones("avx512f", "avx2", "default"))) void sums_of_seeded_columns(const Patterns& p, std::uint64_t seed, char which,
                                                                                std::int64_t col0, std::int64_t cols, std::int64_t n,
                                                                                float* out) {
  std::vector<std::uint32_t> keys(static_cast<std::size_t>((n + kStrip - 1) / kStrip * kStrip), 0);
  for (std::int64_t t = 0; t < n; ++t) keys[static_cast<std::size_t>(t)] = row_key(seed, which, t);
  selected_sums(p, cols, n, kStrip, [&](std::int64_t r, std::int64_t c0, float* buf) -> const float* {
    const auto c = static_cast<std::uint32_t>(col0 + r);
    const std::uint32_t* k = &keys[static_cast<std::size_t>(c0)];
    for (std::int64_t t = 0; t < kStrip; ++t) buf[t] = entry_from(k[t], c);
    if (c0 + kStrip > n) std::fill(buf + (n - c0), buf + kStrip, 0.0f);
    return buf;
  }, out);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) float dot(const float* a, const float* b, std::int64_t n) {
  float lanes[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += a[i + j] * b[i + j];
  float sum = 0;
  for (float l : lanes) sum += l;
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// (m x m) = x * y' for x (m x len) and y (m' x len).
Matrix times_transposed(const Matrix& x, const Matrix& y) {
  Matrix out{x.rows, y.rows, std::vector<float>(static_cast<std::size_t>(x.rows * y.rows))};
  for (std::int64_t p = 0; p < x.rows; ++p)
    for (std::int64_t q = 0; q < y.rows; ++q)
      out.data[static_cast<std::size_t>(p * y.rows + q)] =
          dot(&x.data[static_cast<std::size_t>(p * x.cols)], &y.data[static_cast<std::size_t>(q * y.cols)], x.cols);
  return out;
}

Matrix sums(const Matrix& s, std::int64_t cols) { return {s.cols, cols, std::vector<float>(static_cast<std::size_t>(s.cols * cols))}; }
}  // namespace

Matrix left_side(const Matrix& s_i, const Matrix& a_rows) {
  Matrix out = sums(s_i, a_rows.cols);
  if (s_i.rows == a_rows.rows) sums_of_matrix(patterns_of(s_i), a_rows, out.data.data());
  return out;
}

Matrix right_side(const Matrix& b_cols, const Matrix& r_j) {
  Matrix out = sums(r_j, b_cols.rows);
  if (r_j.rows == b_cols.cols) sums_of_matrix(patterns_of(r_j), transpose(b_cols), out.data.data());
  return out;
}

Matrix seeded_left_side(std::uint64_t seed, std::int64_t n, std::int64_t row0, const Matrix& s_i) {
  Matrix out = sums(s_i, n);
  sums_of_seeded_rows(patterns_of(s_i), seed, 'A', row0, s_i.rows, n, out.data.data());
  return out;
}

Matrix seeded_right_side(std::uint64_t seed, std::int64_t n, std::int64_t col0, const Matrix& r_j) {
  Matrix out = sums(r_j, n);
  sums_of_seeded_columns(patterns_of(r_j), seed, 'B', col0, r_j.rows, n, out.data.data());
  return out;
}

FreivaldsOutcome freivalds_check(const Matrix& s_i, const Matrix& r_j, const Matrix& left, const Matrix& right,
                                 const Matrix& c, double tolerance) {
  FreivaldsOutcome out;
  if (c.rows != s_i.rows || c.cols != r_j.rows || left.cols != right.cols || left.rows != s_i.cols ||
      right.rows != r_j.cols)
    return out;
  Matrix sc = sums(s_i, c.cols);  // S' * C: one pass over C
  sums_of_matrix(patterns_of(s_i), c, sc.data.data());
  const Matrix lhs = times_transposed(sc, transpose(r_j));  // (S' C) R
  const Matrix rhs = times_transposed(left, right);         // (S' A) (B R)
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
