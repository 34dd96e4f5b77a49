#pragma once
// A first pass over untrusted JSON text that builds nothing: it finds syntax
// errors and refuses nesting or value counts over a bound, so that a parser
// which then builds a document (nlohmann's, several times the text's size in
// memory) only ever sees text it can afford.

#include <cstddef>
#include <string_view>

#include "core/error.hpp"

namespace runsnack::render {

// `malformed` ("not valid JSON (at byte N)") or `too_large` naming the bound.
// Values counted: every number, string, literal, key, array and object.
Result<void> check_json_bounds(std::string_view text, int max_depth, std::size_t max_values);

}  // namespace runsnack::render
