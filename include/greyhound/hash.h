// 64-bit mixing shared by every process that derives ids from the same inputs (the hook's group ids, the
// NCCL stand-in's communicator keys, the period detector's op symbols): one definition, so ids computed in
// different processes and binaries agree. Changing it changes group ids: treat it as a format. Pure, std only.
#pragma once

#include <cstdint>
#include <string_view>

namespace greyhound {

// The increment of splitmix64 (2^64 / golden ratio, odd).
inline constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;

// The splitmix64 finaliser (Stafford's Mix13): a bijection in which every input bit affects every output bit.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One splitmix64 output from state x (the generator's step: add the gamma, then finalise).
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept { return mix64(x + kGoldenGamma); }

// FNV-1a (64-bit) of a text: the CSV tokens greyhoundctl turns into op symbols, the agent's pause numbers.
constexpr std::uint64_t fnv1a64(std::string_view text) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace greyhound
