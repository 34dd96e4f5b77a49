#include "pool/matmul/matrix.hpp"

#include "pool/matmul/blas.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

// The hot loops are cloned for AVX-512 and AVX2, picked at run time. Elsewhere
// (the WebAssembly kernels, src/pool/wasm/) each is one plain function.
#if defined(__x86_64__)
#define RUNSNACK_X86_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define RUNSNACK_X86_CLONES
#endif

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
// The seeded matrices, entry by entry: a line (a row of A, or a column of B)
// has a 32-bit key, and its entries come 128 at a time from 16 hashes of
// (key, word): each 32-bit hash is 8 four-bit values v, and the entry is
// (2v - 15) / 16, an odd multiple of 1/16 (zero mean, as the check's
// tolerance assumes). Few random bits an entry make generating them cheap
// (the coordinator regenerates A and B for its check), and every partial sum
// of a product of them is a multiple of 1/256 below 2^24 / 256 for n up to
// 65536: exact in float32, whatever order a BLAS adds in.
// B is made by columns so that B_j R_j, like S_i' A_i, sums whole lines.
constexpr std::int64_t kLineGroup = 128;

std::uint32_t line_key(std::uint64_t seed, char which, std::int64_t line) {
  return static_cast<std::uint32_t>(mix(seed ^ mix(static_cast<std::uint64_t>(which)) ^ mix(static_cast<std::uint64_t>(line) + 1)));
}

// Entries [128 g, 128 g + 128) of a line as v in [0, 16): entry 32 q + l is
// bits [4q, 4q + 4) of the l-th 16-bit half (low half first) of the hashes.
// Written on GCC vector types: as plain loops the 16 hashes stayed scalar and
// their stores stalled the vector loads that followed.
using Words = std::uint32_t __attribute__((vector_size(64)));
using Halves = std::uint16_t __attribute__((vector_size(64)));
[[gnu::always_inline]] inline void line_group(std::uint32_t key, std::uint32_t g, std::uint16_t* out) {
  static_assert(std::endian::native == std::endian::little, "a hash's low half comes first");
  const Words j = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  Words x = key ^ ((g * 16 + j) * 0x9e3779b9u);
  x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;  // lowbias32
  Halves u;
  std::memcpy(&u, &x, sizeof u);  // not bit_cast: UBSan in GCC 12 faults on it for vector types
  for (int q = 0; q < 4; ++q) {
    const Halves v = (u >> (4 * q)) & 15;
    std::memcpy(out + q * 32, &v, sizeof v);
  }
}

// Entries [pos0, pos0 + len) of a line as floats. Cloned for AVX-512 and
// AVX2 (picked at run time): the hash's 32-bit multiplies need them to
// vectorise.
RUNSNACK_X86_CLONES void fill_line(float* out, std::uint32_t key, std::int64_t pos0, std::int64_t len) {
  std::uint16_t v[kLineGroup];
  for (std::int64_t g = pos0 / kLineGroup; g * kLineGroup < pos0 + len; ++g) {
    line_group(key, static_cast<std::uint32_t>(g), v);
    const std::int64_t from = std::max(pos0, g * kLineGroup), to = std::min(pos0 + len, (g + 1) * kLineGroup);
    for (std::int64_t p = from; p < to; ++p) out[p - pos0] = (2.0f * static_cast<float>(v[p - g * kLineGroup]) - 15.0f) * 0.0625f;
  }
}

// Rows of A are its lines; columns of B are B's.
std::int64_t line_of(char which, std::int64_t r, std::int64_t c) { return which == 'B' ? c : r; }
}  // namespace

float seeded_entry(std::uint64_t seed, char which, std::int64_t n, std::int64_t r, std::int64_t c) {
  (void)n;
  float v;
  fill_line(&v, line_key(seed, which, line_of(which, r, c)), line_of(which, c, r), 1);
  return v;
}

Matrix seeded_lines(std::uint64_t seed, char which, std::int64_t n, std::int64_t first, std::int64_t count) {
  Matrix m{count, n, std::vector<float>(static_cast<std::size_t>(count * n))};
  for (std::int64_t l = 0; l < count; ++l) fill_line(&m.data[static_cast<std::size_t>(l * n)], line_key(seed, which, first + l), 0, n);
  return m;
}

Matrix seeded_block(std::uint64_t seed, char which, std::int64_t n, std::int64_t row0, std::int64_t rows,
                    std::int64_t col0, std::int64_t cols) {
  (void)n;
  if (which == 'B') {  // made by columns: the transpose of B's block
    Matrix t{cols, rows, std::vector<float>(static_cast<std::size_t>(rows * cols))};
    for (std::int64_t c = 0; c < cols; ++c)
      fill_line(&t.data[static_cast<std::size_t>(c * rows)], line_key(seed, which, col0 + c), row0, rows);
    return transpose(t);
  }
  Matrix m{rows, cols, std::vector<float>(static_cast<std::size_t>(rows * cols))};
  for (std::int64_t r = 0; r < rows; ++r)
    fill_line(&m.data[static_cast<std::size_t>(r * cols)], line_key(seed, which, row0 + r), col0, cols);
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

Matrix multiply_transposed(const Matrix& a, const Matrix& bt) {
  Matrix c{a.rows, bt.rows, std::vector<float>(static_cast<std::size_t>(a.rows * bt.rows))};
  if (a.rows == 0 || bt.rows == 0 || a.cols == 0) return c;
  blas::sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(a.rows), static_cast<int>(bt.rows),
              static_cast<int>(a.cols), 1.0f, a.data.data(), static_cast<int>(a.cols), bt.data.data(),
              static_cast<int>(bt.cols), 0.0f, c.data.data(), static_cast<int>(c.cols));
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
// and, a strip of columns at a time, every row of X is added once per group
// into the bucket of its 6-bit pattern; each output row is then the sum of
// the buckets whose pattern has its bit. For m = 11 (k = 10) that is 2
// additions per entry of X instead of 5.5.
constexpr int kGroupBits = 6;
constexpr int kBuckets = 1 << kGroupBits;

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

int group_bits(const Patterns& p, int g) { return static_cast<int>(std::min<std::int64_t>(kGroupBits, p.m - g * kGroupBits)); }

// Turns one group's buckets (kBuckets x strip, consumed) into its output
// rows out[bit * cols + c], `width` columns: top bit first, its output is
// the upper half's sum, and folding the upper half onto the lower leaves
// the buckets of the remaining bits.
template <class T>
[[gnu::always_inline]] inline void fold(T* t, std::int64_t strip, int bits, T* sum, T* out, std::int64_t cols, std::int64_t width) {
  for (int bit = bits - 1; bit >= 0; --bit) {
    const std::int64_t half = std::int64_t{1} << bit;
    std::fill_n(sum, strip, T{0});
    for (std::int64_t i = 0; i < half; ++i)
      for (std::int64_t c = 0; c < strip; ++c) sum[c] += t[(half + i) * strip + c], t[i * strip + c] += t[(half + i) * strip + c];
    std::copy_n(sum, width, out + bit * cols);
  }
}

// S' * X for X = lines [first, first + count) of a seeded matrix (n entries
// each), made 128 entries at a time inside the strip loop so the check never
// holds A or B: the values v in [0, 16) (fill_line) summed exactly in 16-bit
// lanes, 32 to an AVX-512 register; count <= 4096 keeps sums under 2^16.
// Tables: 128 columns x 64 buckets x 2 groups x 2 bytes = 32 KiB.
RUNSNACK_X86_CLONES void sums_of_seeded_lines(const Patterns& p, std::uint64_t seed, char which, std::int64_t first,
                                              std::int64_t count, std::int64_t n, std::uint16_t* out) {
  constexpr std::int64_t strip = kLineGroup;
  std::vector<std::uint32_t> keys(static_cast<std::size_t>(count));
  for (std::int64_t r = 0; r < count; ++r) keys[static_cast<std::size_t>(r)] = line_key(seed, which, first + r);
  std::vector<std::uint16_t> tables(static_cast<std::size_t>(p.groups * kBuckets * strip));
  std::uint16_t buf[strip], sum[strip];
  for (std::int64_t c0 = 0; c0 < n; c0 += strip) {
    std::fill(tables.begin(), tables.end(), std::uint16_t{0});
    for (std::int64_t r = 0; r < count; ++r) {
      line_group(keys[static_cast<std::size_t>(r)], static_cast<std::uint32_t>(c0 / strip), buf);
      if (c0 + strip > n) std::fill(buf + (n - c0), buf + strip, std::uint16_t{0});
      const std::uint8_t* pat = &p.of[static_cast<std::size_t>(r * p.groups)];
      for (int g = 0; g < p.groups; ++g) {
        std::uint16_t* t = &tables[static_cast<std::size_t>((g * kBuckets + pat[g]) * strip)];
        for (std::int64_t c = 0; c < strip; ++c) t[c] = static_cast<std::uint16_t>(t[c] + buf[c]);
      }
    }
    for (int g = 0; g < p.groups; ++g)
      fold(&tables[static_cast<std::size_t>(g * kBuckets * strip)], strip, group_bits(p, g), sum, out + g * kGroupBits * n + c0, n,
           std::min(strip, n - c0));
  }
}

// S' * X for a matrix in memory (a tile, or A or B given as files), in
// strips of up to 1024 whole columns (a tile's rows whole: each read is 4 KiB
// in a row, which the prefetcher follows; strips of 64 columns a page apart
// left the core waiting on memory). Rows are taken in the order of their
// first group's pattern, so that group's bucket is summed in one strip-wide
// row in L1 and stored once; the other groups add each row into their
// bucket (64 per group, in L2).
constexpr std::int64_t kTileStrip = 1024;
using Lanes = float __attribute__((vector_size(64)));  // 16 floats: one AVX-512 register, two AVX2 ones
constexpr std::int64_t kLanes = 16;
// Unaligned loads and stores through references: clang refuses to pass or
// return 64-byte vectors by value in the clones without AVX-512.
[[gnu::always_inline]] inline void load_lanes(Lanes& v, const float* p) { std::memcpy(&v, p, sizeof v); }
[[gnu::always_inline]] inline void store_lanes(float* p, const Lanes& v) { std::memcpy(p, &v, sizeof v); }

// rows x cols float32, row-major, read through memcpy: a Matrix, or a tile's
// bytes as they came off the wire, checked where they are.
struct Floats {
  const unsigned char* bytes = nullptr;
  std::int64_t rows = 0, cols = 0;
  const unsigned char* at(std::int64_t r, std::int64_t c) const { return bytes + 4 * (r * cols + c); }
};
Floats floats(const Matrix& m) { return {reinterpret_cast<const unsigned char*>(m.data.data()), m.rows, m.cols}; }
[[gnu::always_inline]] inline float float_at(const unsigned char* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

RUNSNACK_X86_CLONES void sums_of_matrix(const Patterns& p, Floats x, float* out) {
  if (p.groups == 0) return;
  // Counting sort of the rows by their first group's pattern.
  std::vector<std::int32_t> order(static_cast<std::size_t>(x.rows));
  std::int64_t start[kBuckets + 1] = {};
  for (std::int64_t r = 0; r < x.rows; ++r) ++start[p.of[static_cast<std::size_t>(r * p.groups)] + 1];
  for (int b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
  std::int64_t next[kBuckets];
  std::copy_n(start, kBuckets, next);
  for (std::int64_t r = 0; r < x.rows; ++r) order[static_cast<std::size_t>(next[p.of[static_cast<std::size_t>(r * p.groups)]]++)] = static_cast<std::int32_t>(r);
  // Narrower strips when many groups (many rounds) would push the buckets out of L2.
  const std::int64_t strip = std::max<std::int64_t>(64, kTileStrip / std::max(p.groups - 1, 1) / 64 * 64);
  std::vector<float> tables(static_cast<std::size_t>(p.groups * kBuckets * strip)), sum(static_cast<std::size_t>(strip));
  for (std::int64_t c0 = 0; c0 < x.cols; c0 += strip) {
    const std::int64_t width = std::min(strip, x.cols - c0);
    std::fill(tables.begin() + kBuckets * strip, tables.end(), 0.0f);
    for (int b = 0; b < kBuckets; ++b) {
      float* __restrict acc = &tables[static_cast<std::size_t>(b * strip)];
      std::fill_n(acc, width, 0.0f);
      for (std::int64_t i = start[b]; i < start[b + 1]; ++i) {
        const std::int64_t r = order[static_cast<std::size_t>(i)];
        const unsigned char* src = x.at(r, c0);
        const std::uint8_t* pat = &p.of[static_cast<std::size_t>(r * p.groups)];
        float* __restrict t1 = &tables[static_cast<std::size_t>((kBuckets + (p.groups > 1 ? pat[1] : 0)) * strip)];
        std::int64_t c = 0;
        if (p.groups == 2)  // k <= 11: each 16 entries loaded once, added to both buckets
          for (; c + kLanes <= width; c += kLanes) {
            Lanes v, a, t;
            std::memcpy(&v, src + 4 * c, sizeof v), load_lanes(a, acc + c), load_lanes(t, t1 + c);
            a += v, t += v;
            store_lanes(acc + c, a), store_lanes(t1 + c, t);
          }
        for (std::int64_t c1 = c; c1 < width; ++c1) acc[c1] += float_at(src + 4 * c1);
        for (int g = p.groups == 2 ? 2 : 1; g < p.groups; ++g) {
          float* __restrict t = &tables[static_cast<std::size_t>((g * kBuckets + pat[g]) * strip)];
          for (std::int64_t c1 = 0; c1 < width; ++c1) t[c1] += float_at(src + 4 * c1);
        }
        for (std::int64_t c1 = c; p.groups == 2 && c1 < width; ++c1) t1[c1] += float_at(src + 4 * c1);
      }
    }
    for (int g = 0; g < p.groups; ++g)
      fold(&tables[static_cast<std::size_t>(g * kBuckets * strip)], strip, group_bits(p, g), sum.data(), out + g * kGroupBits * x.cols + c0,
           x.cols, width);
  }
}

RUNSNACK_X86_CLONES float dot(const float* a, const float* b, std::int64_t n) {
  Lanes s0 = {}, s1 = {}, s2 = {}, s3 = {};  // four chains: one waits on its own additions
  std::int64_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    Lanes x0, x1, x2, x3, y0, y1, y2, y3;
    load_lanes(x0, a + i), load_lanes(x1, a + i + 16), load_lanes(x2, a + i + 32), load_lanes(x3, a + i + 48);
    load_lanes(y0, b + i), load_lanes(y1, b + i + 16), load_lanes(y2, b + i + 32), load_lanes(y3, b + i + 48);
    s0 += x0 * y0, s1 += x1 * y1, s2 += x2 * y2, s3 += x3 * y3;
  }
  const Lanes all = (s0 + s1) + (s2 + s3);
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += all[l];
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
  if (s_i.rows == a_rows.rows) sums_of_matrix(patterns_of(s_i), floats(a_rows), out.data.data());
  return out;
}

Matrix right_side(const Matrix& b_cols, const Matrix& r_j) {
  Matrix out = sums(r_j, b_cols.rows);
  if (r_j.rows == b_cols.cols) sums_of_matrix(patterns_of(r_j), floats(transpose(b_cols)), out.data.data());
  return out;
}

namespace {
// (S' X) for X = `count` seeded lines from `first`: exact 16-bit sums of
// v = (16 x + 15) / 2 in chunks of 4096 lines, then
// S' X = (2 S' V - 15 |S_m|) / 16, exact in float32 (S' V <= 15 * 4096).
Matrix seeded_sums(std::uint64_t seed, char which, std::int64_t n, std::int64_t first, const Matrix& s) {
  Matrix out = sums(s, n);
  std::vector<std::uint16_t> part(static_cast<std::size_t>(s.cols * n));
  for (std::int64_t r0 = 0; r0 < s.rows; r0 += 4096) {
    const Matrix chunk = sub_block(s, r0, std::min<std::int64_t>(4096, s.rows - r0), 0, s.cols);
    sums_of_seeded_lines(patterns_of(chunk), seed, which, first + r0, chunk.rows, n, part.data());
    for (std::int64_t m = 0; m < s.cols; ++m) {
      float ones = 0;
      for (std::int64_t r = 0; r < chunk.rows; ++r) ones += chunk.at(r, m);
      for (std::int64_t t = 0; t < n; ++t)
        out.data[static_cast<std::size_t>(m * n + t)] += (2 * static_cast<float>(part[static_cast<std::size_t>(m * n + t)]) - 15 * ones) * 0.0625f;
    }
  }
  return out;
}
}  // namespace

Matrix seeded_left_side(std::uint64_t seed, std::int64_t n, std::int64_t row0, const Matrix& s_i) {
  return seeded_sums(seed, 'A', n, row0, s_i);
}

Matrix seeded_right_side(std::uint64_t seed, std::int64_t n, std::int64_t col0, const Matrix& r_j) {
  return seeded_sums(seed, 'B', n, col0, r_j);  // B's columns are its lines
}

FreivaldsSide freivalds_side(Matrix vectors, Matrix sums) {
  FreivaldsSide side{std::move(vectors), {}, {}, std::move(sums)};
  side.transposed = transpose(side.vectors);
  side.patterns = patterns_of(side.vectors).of;
  return side;
}

FreivaldsOutcome freivalds_check(const FreivaldsSide& row, const FreivaldsSide& col, const Matrix& c, double tolerance) {
  return freivalds_check(row, col, {reinterpret_cast<const char*>(c.data.data()), c.data.size() * sizeof(float)}, c.rows, c.cols,
                         tolerance);
}

FreivaldsOutcome freivalds_check(const FreivaldsSide& row, const FreivaldsSide& col, std::string_view tile, std::int64_t rows,
                                 std::int64_t cols, double tolerance) {
  static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");
  FreivaldsOutcome out;
  const Matrix &left = row.sums, &right = col.sums;
  if (rows < 0 || cols < 0 || tile.size() != static_cast<std::size_t>(rows * cols) * sizeof(float) || rows != row.vectors.rows ||
      cols != col.vectors.rows || left.cols != right.cols || left.rows != row.vectors.cols || right.rows != col.vectors.cols ||
      col.transposed.rows != col.vectors.cols)
    return out;
  const Floats c{reinterpret_cast<const unsigned char*>(tile.data()), rows, cols};
  const Patterns p{row.vectors.cols, static_cast<int>((row.vectors.cols + kGroupBits - 1) / kGroupBits), row.patterns};
  if (p.of.size() != static_cast<std::size_t>(c.rows * p.groups)) return out;
  Matrix sc = sums(row.vectors, c.cols);  // S' * C: one pass over C
  sums_of_matrix(p, c, sc.data.data());
  const Matrix lhs = times_transposed(sc, col.transposed);  // (S' C) R
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
