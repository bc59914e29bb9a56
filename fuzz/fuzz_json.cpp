// The bounded JSON reader (common/bounded_json.h) on any text: it never crashes, never builds a tree that
// breaks its limits, and accepts only what nlohmann's own parser reads the same way.
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "fuzz/fuzz_check.h"

namespace {

using greyhound::fuzz::check;

int depth(const nlohmann::json& j) {
  if (!j.is_structured()) return 0;
  int d = 0;
  for (const auto& v : j) d = std::max(d, depth(v));
  return d + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = greyhound::fuzz::text_of(data, size);
  greyhound::JsonLimits small;
  small.max_bytes = 4096;
  small.max_depth = 6;
  small.max_string = 64;
  small.max_members = 16;
  for (const greyhound::JsonLimits& limits : {greyhound::JsonLimits{}, small}) {
    auto j = greyhound::parse_bounded(text, limits);
    if (!j) {
      check(!j.error().empty(), "a refusal says why");
      continue;
    }
    check(text.size() <= limits.max_bytes, "no text above max_bytes is read");
    check(depth(*j) <= limits.max_depth, "no tree deeper than max_depth is built");
    const auto plain = nlohmann::json::parse(text, nullptr, false);
    check(!plain.is_discarded() && plain == *j, "what it reads, nlohmann reads the same");
    auto again = greyhound::parse_bounded(j->dump(), limits);
    check(!again || *again == *j, "its own dump reads back the same");
  }
  return 0;
}
