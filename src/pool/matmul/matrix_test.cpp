#include "pool/matmul/matrix.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace runsnack::pool::matmul {
namespace {

constexpr double kTol = 1e-5;

TEST(Matmul, SeededBlocksAgreeWithTheWholeMatrix) {
  Matrix whole = seeded_block(7, 'A', 64, 0, 64, 0, 64);
  Matrix part = seeded_block(7, 'A', 64, 16, 8, 32, 4);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(part.at(r, c), whole.at(16 + r, 32 + c));
  EXPECT_NE(seeded_block(8, 'A', 64, 0, 1, 0, 1).at(0, 0), whole.at(0, 0));
  EXPECT_NE(seeded_block(7, 'B', 64, 0, 1, 0, 1).at(0, 0), whole.at(0, 0));
  for (float v : whole.data) EXPECT_TRUE(v >= -1.0f && v < 1.0f);
}

TEST(Matmul, SeededEntriesAreOddSixteenthsAndBIsMadeByColumns) {
  Matrix a = seeded_block(7, 'A', 300, 0, 3, 0, 300);
  std::vector<int> seen(16, 0);
  for (float v : a.data) {
    const float k = (v * 16 + 15) / 2;  // back to the 4-bit value
    ASSERT_EQ(k, std::floor(k)) << v;
    ASSERT_TRUE(k >= 0 && k < 16) << v;
    ++seen[static_cast<std::size_t>(k)];
  }
  for (int count : seen) EXPECT_GT(count, 20);  // 900 entries, about 56 of each
  // B's columns are its lines, A's rows are its; every way of making an entry agrees.
  const std::int64_t n = 200;
  Matrix b_cols = seeded_lines(7, 'B', n, 130, 5), b = seeded_block(7, 'B', n, 0, n, 130, 5);
  Matrix a_rows = seeded_lines(7, 'A', n, 3, 2);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t c = 0; c < 5; ++c) {
      EXPECT_EQ(b.at(t, c), b_cols.at(c, t));
      EXPECT_EQ(b.at(t, c), seeded_entry(7, 'B', n, t, 130 + c));
    }
  for (std::int64_t c = 0; c < n; ++c) EXPECT_EQ(a_rows.at(1, c), seeded_entry(7, 'A', n, 4, c));
}

TEST(Matmul, SeededProductsAreExactInFloat32) {
  // Odd sixteenths: every partial sum is a multiple of 1/256 well inside
  // float32's 24 bits, so any BLAS gives exactly the true product.
  const std::int64_t n = 1000;
  Matrix a = seeded_lines(11, 'A', n, 0, 6), bt = seeded_lines(11, 'B', n, 0, 7);
  Matrix c = multiply_transposed(a, bt);
  ASSERT_EQ(c.rows, 6);
  ASSERT_EQ(c.cols, 7);
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = 0; j < 7; ++j) {
      double exact = 0;
      for (std::int64_t t = 0; t < n; ++t) exact += static_cast<double>(a.at(i, t)) * bt.at(j, t);
      EXPECT_EQ(static_cast<double>(c.at(i, j)), exact);
    }
}

TEST(Matmul, MultiplyMatchesTheDefinition) {
  Matrix a = seeded_block(1, 'A', 16, 0, 5, 0, 16), b = seeded_block(1, 'B', 16, 0, 16, 0, 3);
  Matrix c = multiply(a, b);
  ASSERT_EQ(c.rows, 5);
  ASSERT_EQ(c.cols, 3);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 16; ++k) s += static_cast<double>(a.at(i, k)) * b.at(k, j);
      EXPECT_NEAR(c.at(i, j), s, 1e-5);
    }
}

struct Block {
  Matrix a, b, c;
};
Block honest_block(std::int64_t n, std::int64_t bsz) {
  Block blk{seeded_block(3, 'A', n, 0, bsz, 0, n), seeded_block(3, 'B', n, 0, n, bsz, bsz), {}};
  blk.c = multiply(blk.a, blk.b);
  return blk;
}

FreivaldsOutcome check(const Block& blk, const Matrix& c, std::uint64_t secret, int rounds) {
  Matrix s = freivalds_vectors(secret, 0, blk.a.rows, rounds), r = freivalds_vectors(secret, 1, blk.b.cols, rounds);
  Matrix left = left_side(s, blk.a), right = right_side(blk.b, r);
  return freivalds_check(freivalds_side(std::move(s), std::move(left)), freivalds_side(std::move(r), std::move(right)), c, kTol);
}

TEST(Freivalds, AcceptsAnHonestBlock) {
  auto blk = honest_block(256, 64);
  for (std::uint64_t secret = 0; secret < 5; ++secret) {
    auto out = check(blk, blk.c, secret, 10);
    EXPECT_TRUE(out.accepted) << out.max_error;
  }
}

TEST(Freivalds, VectorsAreZeroOneSecretAndSizedByRounds) {
  Matrix r = freivalds_vectors(1, 0, 1000, 10);
  EXPECT_EQ(r.cols, 11);
  int ones = 0;
  for (float v : r.data) {
    EXPECT_TRUE(v == 0.0f || v == 1.0f);
    ones += v == 1.0f;
  }
  EXPECT_GT(ones, 5000);
  EXPECT_LT(ones, 6000);
  EXPECT_NE(freivalds_vectors(2, 0, 1000, 10).data, r.data);
  EXPECT_NE(freivalds_vectors(1, 1, 1000, 10).data, r.data);
}

TEST(Freivalds, SeededHalvesEqualTheMaterialisedOnes) {
  const std::int64_t n = 96;
  Matrix s = freivalds_vectors(4, 0, 32, 20), r = freivalds_vectors(4, 1, 24, 20);
  Matrix a_rows = seeded_block(9, 'A', n, 32, 32, 0, n), b_cols = seeded_block(9, 'B', n, 0, n, 48, 24);
  Matrix l1 = left_side(s, a_rows), l2 = seeded_left_side(9, n, 32, s);
  Matrix r1 = right_side(b_cols, r), r2 = seeded_right_side(9, n, 48, r);
  ASSERT_EQ(l1.data.size(), l2.data.size());
  ASSERT_EQ(r1.data.size(), r2.data.size());
  EXPECT_EQ(l1.data, l2.data);  // sums of sixteenths: exact both ways
  EXPECT_EQ(r1.data, r2.data);
}

TEST(Freivalds, SeededSidesRejectOneFlippedEntryInRaggedTiles) {
  // The coordinator's path: halves made from the seed, a tile whose sizes
  // are not multiples of the strips, and many rounds (more bucket groups).
  const std::int64_t n = 300, r0 = 64, rows = 70, c0 = 100, cols = 45;
  const Matrix c = multiply_transposed(seeded_lines(9, 'A', n, r0, rows), seeded_lines(9, 'B', n, c0, cols));
  for (int rounds : {10, 40}) {
    for (std::uint64_t t = 0; t < 20; ++t) {
      Matrix s = freivalds_vectors(t, 0, rows, rounds), r = freivalds_vectors(t, 1, cols, rounds);
      Matrix left = seeded_left_side(9, n, r0, s), right = seeded_right_side(9, n, c0, r);
      const FreivaldsSide row = freivalds_side(std::move(s), std::move(left)), col = freivalds_side(std::move(r), std::move(right));
      EXPECT_TRUE(freivalds_check(row, col, c, kTol).accepted);
      Matrix bad = c;
      std::size_t i = t * 37 % bad.data.size();
      while (std::fabs(bad.data[i]) < 1) i = (i + 1) % bad.data.size();  // a bit flip in a near-zero entry is below tolerance
      std::uint32_t bits;
      std::memcpy(&bits, &bad.data[i], 4);
      bits ^= 1u << 22;
      std::memcpy(&bad.data[i], &bits, 4);
      EXPECT_FALSE(freivalds_check(row, col, bad, kTol).accepted) << "rounds " << rounds << ", entry " << i;
    }
  }
}

TEST(Freivalds, RejectsAFlippedBit) {
  auto blk = honest_block(256, 64);
  int caught = 0, trials = 40;
  for (int t = 0; t < trials; ++t) {
    Matrix bad = blk.c;
    // Flip a high mantissa bit of one entry: an error far above rounding.
    auto& v = bad.data[static_cast<std::size_t>(t * 97) % bad.data.size()];
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits ^= 1u << 22;
    std::memcpy(&v, &bits, 4);
    if (!check(blk, bad, 1000 + static_cast<std::uint64_t>(t), 20).accepted) ++caught;
  }
  EXPECT_EQ(caught, trials);  // each check misses with probability at most 2^-20
}

TEST(Freivalds, CatchesErrorsAboveToleranceButNotRounding) {
  auto blk = honest_block(128, 32);
  for (std::uint64_t t = 0; t < 50; ++t) {
    Matrix one = blk.c;
    one.data[t * 13 % one.data.size()] += 0.5f;  // one entry off by ~13% of its typical size
    EXPECT_FALSE(check(blk, one, t, 20).accepted);
    Matrix spread = blk.c;  // every entry off a little, signs cancelling in sums
    for (std::size_t i = 0; i < spread.data.size(); ++i) spread.data[i] += (i + t) % 2 ? 0.01f : -0.01f;
    EXPECT_FALSE(check(blk, spread, t, 20).accepted);
    Matrix rounding = blk.c;  // the last bit of every entry: what another BLAS might differ by
    for (auto& v : rounding.data) v = std::nextafter(v, 100.0f);
    EXPECT_TRUE(check(blk, rounding, t, 20).accepted);
  }
}

TEST(Freivalds, TheBoundIsRealOneRoundMissesSometimes) {
  // k = 1: two 0/1 columns a side; one wrong entry is missed when its row
  // bits or its column bits are all zero: 2/4 - 1/16 = 44% of the time.
  auto blk = honest_block(128, 32);
  Matrix bad = blk.c;
  bad.data[5] += 100.0f;
  int accepted1 = 0, accepted12 = 0, trials = 200;
  for (int t = 0; t < trials; ++t) {
    accepted1 += check(blk, bad, static_cast<std::uint64_t>(t), 1).accepted;
    accepted12 += check(blk, bad, static_cast<std::uint64_t>(t), 12).accepted;
  }
  EXPECT_GT(accepted1, trials / 5);
  EXPECT_LT(accepted1, trials * 7 / 10);
  EXPECT_EQ(accepted12, 0);
}

TEST(Freivalds, RejectsNaNAndWrongShapes) {
  auto blk = honest_block(64, 16);
  Matrix nan = blk.c;
  nan.data[0] = NAN;
  EXPECT_FALSE(check(blk, nan, 5, 4).accepted);
  Matrix small = sub_block(blk.c, 0, 8, 0, 16);
  EXPECT_FALSE(check(blk, small, 5, 4).accepted);
}

TEST(Npy, RoundTripsAndReadsNumpysHeader) {
  Matrix m = seeded_block(2, 'A', 8, 0, 3, 0, 5);
  auto back = parse_npy(encode_npy(m));
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(back->rows, 3);
  EXPECT_EQ(back->cols, 5);
  EXPECT_EQ(back->data, m.data);
  EXPECT_EQ(encode_npy(m).size() % 64, to_bytes(m).size() % 64);  // data 64-aligned
  // What numpy 1.24 writes for np.zeros((2,2), np.float32).
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  header.append(118 - header.size(), ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header + std::string(16, '\0');
  auto z = parse_npy(file);
  ASSERT_TRUE(z) << z.error().what();
  EXPECT_EQ(z->rows, 2);
}

TEST(Npy, RejectsWhatItCannotRead) {
  Matrix m = seeded_block(2, 'A', 8, 0, 2, 0, 2);
  std::string good = encode_npy(m);
  auto err = [](std::string_view bytes) {
    auto r = parse_npy(bytes);
    return r ? std::string("accepted") : r.error().what();
  };
  EXPECT_NE(err("hello").find("not a .npy"), std::string::npos);
  EXPECT_NE(err(good.substr(0, good.size() - 1)).find("bytes"), std::string::npos);
  std::string f8 = good;
  f8.replace(f8.find("<f4"), 3, "<f8");
  EXPECT_NE(err(f8).find("float32"), std::string::npos);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_NE(err(fortran).find("C order"), std::string::npos);
  std::string three = good;
  three.replace(three.find("(2, 2)"), 6, "(2,2,1)");
  EXPECT_NE(err(three).find("two-dimensional"), std::string::npos);
  std::string huge = good;
  huge.replace(huge.find("(2, 2)"), 6, "(999999999, 999999999)");
  EXPECT_NE(err(huge).find("too large"), std::string::npos);
}

}  // namespace
}  // namespace runsnack::pool::matmul
