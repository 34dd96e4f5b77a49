#include "pool/render/json_bounds.hpp"

#include <nlohmann/json.hpp>
#include <string>

namespace runsnack::render {
namespace {

using nlohmann::json;

// SAX events only count: returning false stops the parse at once.
class BoundsCheck final : public json::json_sax_t {
 public:
  BoundsCheck(int max_depth, std::size_t max_values) : max_depth_(max_depth), max_values_(max_values) {}

  Error error;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool key(string_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    error = fail(errc::malformed, "not valid JSON (at byte " + std::to_string(position) + ")");
    return false;
  }

 private:
  bool value() {
    if (++values_ <= max_values_) return true;
    error = fail(errc::too_large, "more than " + std::to_string(max_values_) + " JSON values");
    return false;
  }
  bool open() {
    if (++depth_ > max_depth_) {
      error = fail(errc::too_large, "JSON nested deeper than " + std::to_string(max_depth_) + " levels");
      return false;
    }
    return value();
  }
  bool close() {
    --depth_;
    return true;
  }

  int max_depth_;
  std::size_t max_values_;
  int depth_ = 0;
  std::size_t values_ = 0;
};

}  // namespace

Result<void> check_json_bounds(std::string_view text, int max_depth, std::size_t max_values) {
  BoundsCheck check(max_depth, max_values);
  if (!json::sax_parse(text, &check, json::input_format_t::json, /*strict=*/true)) return check.error;
  return {};
}

}  // namespace runsnack::render
