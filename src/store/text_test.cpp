#include "store/text.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(BoundedText, KeepsValidShortText) { EXPECT_EQ(bounded_text("héllo ✓ 😀", 100), "héllo ✓ 😀"); }

TEST(BoundedText, CutsOnCharacterBoundary) {
  // "é" is two bytes: a cut at 2 must not split it.
  EXPECT_EQ(bounded_text("aé", 2), "a");
  EXPECT_EQ(bounded_text("aé", 3), "aé");
  EXPECT_EQ(bounded_text("abcdef", 3), "abc");
  EXPECT_EQ(bounded_text("abc", 0), "");
}

TEST(BoundedText, ReplacesInvalidAndControlBytes) {
  EXPECT_EQ(bounded_text("a\xff"
                         "b",
                         10),
            "a?b");
  EXPECT_EQ(bounded_text("\xc0\xaf", 10), "??");       // overlong '/'
  EXPECT_EQ(bounded_text("\xed\xa0\x80", 10), "???");  // surrogate
  EXPECT_EQ(bounded_text("\xe2\x9c", 10), "??");       // truncated sequence
  EXPECT_EQ(bounded_text(std::string("a\0b\x1b[2J\n", 8), 10), "a?b?[2J?");
}

}  // namespace
}  // namespace runsnack
