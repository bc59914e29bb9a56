#include "common/text.h"

#include <charconv>

#include <cmath>
#include <cstdlib>

namespace greyhound {

std::optional<double> parse_decimal(std::string_view text) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i - from;
  };
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  std::size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return std::nullopt;
  }
  if (i != text.size()) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);  // an underflow is 0 or subnormal; an overflow is not finite
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long long> parse_integer(std::string_view text) {
  long long v = 0;
  const char* const last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(text.data(), last, v);
  if (text.empty() || ec != std::errc{} || end != last) return std::nullopt;
  return v;
}

std::string printable(std::string_view text, std::size_t max_len) {
  std::string out;
  for (char c : text.substr(0, max_len)) out += c >= 0x20 && c <= 0x7e ? c : '?';
  if (text.size() > max_len) out += "...";
  return out;
}

}  // namespace greyhound
