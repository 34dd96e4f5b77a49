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

TEST(Freivalds, AcceptsAnHonestBlock) {
  auto blk = honest_block(256, 64);
  Matrix r = freivalds_vectors(99, 64, 10);
  auto out = freivalds_check(blk.a, blk.b, blk.c, r, {}, kTol);
  EXPECT_TRUE(out.accepted) << out.max_error;
  // The precomputed B*r gives the same answer.
  auto again = freivalds_check(blk.a, blk.b, blk.c, r, multiply(blk.b, r), kTol);
  EXPECT_TRUE(again.accepted);
}

TEST(Freivalds, RejectsAFlippedBitInAnyRoundSet) {
  auto blk = honest_block(256, 64);
  int caught = 0, trials = 40;
  for (int t = 0; t < trials; ++t) {
    Matrix bad = blk.c;
    // Flip a high mantissa bit of one entry: an error far above rounding.
    std::uint32_t bits;
    std::memcpy(&bits, &bad.data[static_cast<std::size_t>(t * 97 % bad.data.size())], 4);
    bits ^= 1u << 21;
    std::memcpy(&bad.data[static_cast<std::size_t>(t * 97 % bad.data.size())], &bits, 4);
    Matrix r = freivalds_vectors(1000 + static_cast<std::uint64_t>(t), 64, 10);
    if (!freivalds_check(blk.a, blk.b, bad, r, {}, kTol).accepted) ++caught;
  }
  // Each check misses with probability at most 2^-10.
  EXPECT_GE(caught, trials - 1);
}

TEST(Freivalds, OneRoundMissesAboutHalfTheTime) {
  // With a single 0/1 vector an error in one column is seen only when that
  // column's entry of r is 1: the 2^-k bound is tight, not decorative.
  auto blk = honest_block(128, 32);
  Matrix bad = blk.c;
  bad.data[5] += 100.0f;
  int accepted = 0, trials = 200;
  for (int t = 0; t < trials; ++t)
    if (freivalds_check(blk.a, blk.b, bad, freivalds_vectors(static_cast<std::uint64_t>(t), 32, 1), {}, kTol).accepted)
      ++accepted;
  EXPECT_GT(accepted, trials / 4);
  EXPECT_LT(accepted, trials * 3 / 4);
}

TEST(Freivalds, RejectsNaNAndWrongShapes) {
  auto blk = honest_block(64, 16);
  Matrix r = freivalds_vectors(5, 16, 4);
  Matrix nan = blk.c;
  nan.data[0] = NAN;
  EXPECT_FALSE(freivalds_check(blk.a, blk.b, nan, r, {}, kTol).accepted);
  Matrix small = sub_block(blk.c, 0, 8, 0, 16);
  EXPECT_FALSE(freivalds_check(blk.a, blk.b, small, r, {}, kTol).accepted);
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
