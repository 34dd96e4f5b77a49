#include "core/json_fields.hpp"

#include <limits>

namespace runsnack {

namespace {

const nlohmann::json* find(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

}  // namespace

std::string string_or(const nlohmann::json& obj, const char* key, std::string_view fallback) {
  const auto* v = find(obj, key);
  return v && v->is_string() ? v->get<std::string>() : std::string(fallback);
}

double number_or(const nlohmann::json& obj, const char* key, double fallback) {
  const auto* v = find(obj, key);
  return v && v->is_number() ? v->get<double>() : fallback;
}

std::int64_t int_or(const nlohmann::json& obj, const char* key, std::int64_t fallback) {
  const auto* v = find(obj, key);
  if (!v) return fallback;
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<std::int64_t>();
  if (v->is_number_unsigned() && v->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return static_cast<std::int64_t>(v->get<std::uint64_t>());
  return fallback;
}

bool bool_or(const nlohmann::json& obj, const char* key, bool fallback) {
  const auto* v = find(obj, key);
  return v && v->is_boolean() ? v->get<bool>() : fallback;
}

nlohmann::json field_or(const nlohmann::json& obj, const char* key, const nlohmann::json& fallback) {
  const auto* v = find(obj, key);
  return v ? *v : fallback;
}

}  // namespace runsnack
