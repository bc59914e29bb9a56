// The one way greyhound turns a text read from outside (Redis values, reports, schedule and settings files)
// into JSON: bounded before anything is built. A value anyone can write must not cost a reader its stack, its
// memory or its time: the text is scanned first (SAX, no tree) and rejected when it is too large, nested too
// deep (a tree copy recurses once per level), holds too long a string or too many members, or a number that
// is not finite. Only then is the tree built, and every later copy of it is bounded by the same limits.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "greyhound/result.h"

namespace greyhound {

struct JsonLimits {
  std::size_t max_bytes = 1 << 20;      // the whole text
  int max_depth = 16;                   // nested objects/arrays (the deepest message has 5 levels)
  std::size_t max_string = 64 << 10;    // one string or key, bytes
  std::size_t max_members = 1 << 16;    // entries of one object or array
};

// The JSON value of `text`, or an Errc::kInvalid error saying what is wrong (in printable ASCII).
Result<nlohmann::json> parse_bounded(std::string_view text, const JsonLimits& limits = {});

}  // namespace greyhound
