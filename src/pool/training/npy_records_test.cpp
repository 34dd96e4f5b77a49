#include "pool/training/npy_records.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool::training {
namespace {

// A .npy as NumPy 1.24 writes np.arange(n*2*3, dtype=np.uint8).reshape(n, 2, 3).
std::string make_npy(std::int64_t n, const std::string& descr = "|u1", std::size_t item = 1) {
  NpyLayout layout{descr, {n, 2, 3}, item, 0};
  std::string values(static_cast<std::size_t>(n) * 6 * item, '\0');
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<char>(i);
  // npy_rows writes the header; give it a layout whose data starts at 0 of `values`.
  return npy_rows(values, layout, 0, n).value();
}

TEST(NpyRecords, SplitsByRowsAndEachPartParses) {
  const std::string all = make_npy(10);
  auto layout = parse_npy_layout(all);
  ASSERT_TRUE(layout) << layout.error().what();
  EXPECT_EQ(layout->shape, (std::vector<std::int64_t>{10, 2, 3}));
  EXPECT_EQ(layout->data_offset % 64, 0u);
  auto part = npy_rows(all, *layout, 3, 7);
  ASSERT_TRUE(part);
  auto again = parse_npy_layout(*part);
  ASSERT_TRUE(again) << again.error().what();
  EXPECT_EQ(again->shape, (std::vector<std::int64_t>{4, 2, 3}));
  EXPECT_EQ(static_cast<unsigned char>((*part)[again->data_offset]), 18u);  // row 3 starts at item 18
  EXPECT_EQ(part->size() - again->data_offset, 24u);
  EXPECT_FALSE(npy_rows(all, *layout, 5, 11));
}

TEST(NpyRecords, RefusesWhatIsNotAFixedSizeCOrderArray) {
  const std::string good = make_npy(4, "<f4", 4);
  ASSERT_TRUE(parse_npy_layout(good));
  EXPECT_FALSE(parse_npy_layout("not numpy at all"));
  EXPECT_FALSE(parse_npy_layout(good.substr(0, good.size() - 1)));  // values short of the shape
  EXPECT_FALSE(parse_npy_layout(good + "x"));                        // and past it
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"'<f4'", "'|O8'"}, {"'<f4'", "'<U5'"}, {"False", "True "}, {"(4, 2, 3)", "()       "}}) {
    std::string bad = good;
    const auto at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    EXPECT_FALSE(parse_npy_layout(bad)) << to;
  }
}

}  // namespace
}  // namespace runsnack::pool::training
