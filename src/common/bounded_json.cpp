#include "common/bounded_json.h"

#include <cmath>
#include <vector>

namespace greyhound {
namespace {

using nlohmann::json;

// Checks the limits while nlohmann's (iterative) parser reads; builds nothing.
class Checker {
 public:
  explicit Checker(const JsonLimits& l) : l_(l) {}
  bool null() { return member(); }
  bool boolean(bool) { return member(); }
  bool number_integer(json::number_integer_t) { return member(); }
  bool number_unsigned(json::number_unsigned_t) { return member(); }
  bool number_float(json::number_float_t v, const json::string_t&) {
    if (!std::isfinite(v)) return fail("a number is not finite");
    return member();
  }
  bool string(json::string_t& s) { return text(s) && member(); }
  bool binary(json::binary_t&) { return fail("binary values are not JSON text"); }
  bool key(json::string_t& s) { return text(s); }
  bool start_object(std::size_t) { return open(); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (error_.empty()) error_ = "not valid JSON: " + printable(e.what(), 256);
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  bool text(const json::string_t& s) {
    return s.size() <= l_.max_string ? true : fail("a string of " + std::to_string(s.size()) + " bytes is too long");
  }
  bool member() {
    if (!counts_.empty() && ++counts_.back() > l_.max_members) {
      return fail("an object or array has more than " + std::to_string(l_.max_members) + " entries");
    }
    return true;
  }
  bool open() {
    if (!member()) return false;
    if (static_cast<int>(counts_.size()) >= l_.max_depth) {
      return fail("nested deeper than " + std::to_string(l_.max_depth) + " levels");
    }
    counts_.push_back(0);
    return true;
  }
  bool close() {
    counts_.pop_back();
    return true;
  }

  const JsonLimits& l_;
  std::vector<std::size_t> counts_;  // entries so far of each open object/array
  std::string error_;
};

}  // namespace

Result<json> parse_bounded(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Result<json>::failure("value of " + std::to_string(text.size()) + " bytes is too large");
  }
  Checker checker(limits);
  if (!json::sax_parse(text, &checker)) {
    return Result<json>::failure(checker.error().empty() ? "not valid JSON" : checker.error());
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return Result<json>::failure("not valid JSON: " + printable(e.what(), 256));
  }
}

}  // namespace greyhound
