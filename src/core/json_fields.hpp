#pragma once
// Optional fields of JSON that came from a peer. nlohmann's value(key, default)
// throws when the field is there with another type, and an exception is never
// how a peer's mistake should end a stream; these give the fallback instead,
// for a field that is missing, mistyped, or read from something not an object.
// A field that must be there is read with session/message.hpp's get_string etc.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace runsnack {

std::string string_or(const nlohmann::json& obj, const char* key, std::string_view fallback = {});
double number_or(const nlohmann::json& obj, const char* key, double fallback);
// An integer, or `fallback` (also for a fraction or a number outside int64).
std::int64_t int_or(const nlohmann::json& obj, const char* key, std::int64_t fallback);
bool bool_or(const nlohmann::json& obj, const char* key, bool fallback);
// The field's value of any type, or `fallback` (an object unless given).
nlohmann::json field_or(const nlohmann::json& obj, const char* key,
                        const nlohmann::json& fallback = nlohmann::json::object());

}  // namespace runsnack
