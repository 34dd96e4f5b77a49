#include "core/printable.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(Printable, PlainTextAndOtherScriptsPassUnchanged) {
  EXPECT_EQ(printable("gpu-box.local"), "gpu-box.local");
  EXPECT_EQ(printable("Grüße, 東京 ✓"), "Grüße, 東京 ✓");
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, TerminalControlIsEscaped) {
  EXPECT_EQ(printable("a\x1b]0;pwned\x07" "b"), "a\\x1b]0;pwned\\x07b");
  EXPECT_EQ(printable("\x1b[2J\r\x08\x7f"), "\\x1b[2J\\x0d\\x08\\x7f");
  EXPECT_EQ(printable("x\ny\tz"), "x\\x0ay\\x09z");
  EXPECT_EQ(printable_lines("x\ny\tz\r"), "x\ny\tz\\x0d");
}

TEST(Printable, C1ControlsAndBidiOverridesAreEscaped) {
  EXPECT_EQ(printable("\xc2\x9b" "6n"), "\\u009b6n");           // CSI, the 8-bit form
  EXPECT_EQ(printable("abc\xe2\x80\xae" "cba"), "abc\\u202ecba");  // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(printable("\xe2\x81\xa6x"), "\\u2066x");              // LEFT-TO-RIGHT ISOLATE
}

TEST(Printable, BytesThatAreNotUtf8AreShownAsHex) {
  EXPECT_EQ(printable("a\xff" "b"), "a\\xffb");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");          // cut short
}

}  // namespace
}  // namespace runsnack
