#include "core/json_fields.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

using nlohmann::json;

TEST(JsonFields, PresentFieldsOfTheRightType) {
  const json j = {{"s", "text"}, {"d", 2.5}, {"i", -7}, {"u", 9}, {"b", true}, {"o", {{"k", 1}}}};
  EXPECT_EQ(string_or(j, "s"), "text");
  EXPECT_EQ(number_or(j, "d", 0), 2.5);
  EXPECT_EQ(number_or(j, "i", 0), -7.0);
  EXPECT_EQ(int_or(j, "i", 0), -7);
  EXPECT_EQ(int_or(j, "u", 0), 9);
  EXPECT_TRUE(bool_or(j, "b", false));
  EXPECT_EQ(field_or(j, "o"), json({{"k", 1}}));
}

TEST(JsonFields, MissingOrMistypedFieldsGiveTheFallback) {
  const json j = {{"s", 5}, {"d", "2.5"}, {"i", 1.5}, {"big", 18446744073709551615ULL}, {"b", 1}, {"arr", {1, 2}}};
  EXPECT_EQ(string_or(j, "s", "x"), "x");
  EXPECT_EQ(string_or(j, "missing"), "");
  EXPECT_EQ(number_or(j, "d", -1), -1.0);
  EXPECT_EQ(int_or(j, "i", 3), 3);
  EXPECT_EQ(int_or(j, "big", 3), 3);
  EXPECT_FALSE(bool_or(j, "b", false));
  EXPECT_EQ(field_or(j, "missing"), json::object());
  EXPECT_EQ(field_or(j, "arr"), json({1, 2}));
}

TEST(JsonFields, NotAnObject) {
  for (const json& j : {json(nullptr), json(3), json("op"), json::array({"op", 1})}) {
    EXPECT_EQ(string_or(j, "op", "none"), "none");
    EXPECT_EQ(int_or(j, "op", 4), 4);
    EXPECT_TRUE(bool_or(j, "op", true));
    EXPECT_EQ(field_or(j, "op", json(7)), json(7));
  }
}

}  // namespace
}  // namespace runsnack
