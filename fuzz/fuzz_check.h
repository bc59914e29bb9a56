// What every fuzz target shares: a property check that stops the run with its reason (libFuzzer then saves
// the input as a crash), and the input as text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace greyhound::fuzz {

// A broken property is a crash like any other: libFuzzer keeps the input and the run fails.
inline void check(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property broken: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace greyhound::fuzz
