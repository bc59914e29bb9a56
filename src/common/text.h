// Text read from outside (flags, CSV cells, settings values): one strict number reader and one way to quote
// what was read in an error message.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace greyhound {

// A finite decimal number as people write one: an optional sign, digits with an optional fraction (`5`,
// `5.`, `.5`, `5.25`) and an optional exponent (`1e-3`), and nothing around it. std::strtod alone also
// takes hexadecimal (`0x10`), `inf`, `nan` and leading blanks.
std::optional<double> parse_decimal(std::string_view text);

// A decimal integer as greyhound writes one: an optional '-' and digits, nothing around them, within a long
// long. std::strtol alone also takes leading blanks and a '+', so that " 4" and "+4" read as 4 (two spellings
// of one hash field, "member:4" and "member:+4", named the same group rank).
std::optional<long long> parse_integer(std::string_view text);

// `text` with every byte outside printable ASCII replaced by '?', cut to `max_len` bytes (then "..."): for
// messages that quote what was read (a JSON writer refuses invalid UTF-8, a log line should carry no control
// bytes, and a 5 MB cell must not come back whole).
std::string printable(std::string_view text, std::size_t max_len = 128);

}  // namespace greyhound
