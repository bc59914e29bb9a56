// Group ids: one 64-bit id per communicator, equal on every member rank, so that records of one group can
// be joined across ranks and nodes. Derived only from what every member sees identically:
//  - ncclCommInitRank[Config]: the ncclUniqueId bytes;
//  - ncclCommInitRankScalable: all the ncclUniqueIds given;
//  - ncclCommSplit: the parent's id, the index of this split among the parent's splits (collective calls,
//    so every member counts the same), and the color;
//  - ncclCommShrink: the parent's id, the same index, and the excluded ranks.
// 0 means "no group".
#pragma once

#include <cstddef>
#include <cstdint>

#include "greyhound/hash.h"

namespace greyhound::hook {

inline std::uint64_t hash_bytes(const void* data, std::size_t n, std::uint64_t seed = 0) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0xcbf29ce484222325ull ^ mix64(seed);  // FNV-1a, then a strong finaliser
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return mix64(h);
}

inline std::uint64_t nonzero(std::uint64_t h) noexcept { return h == 0 ? 1 : h; }

inline std::uint64_t group_id_from_unique_id(const void* id_bytes, std::size_t n) noexcept {
  return nonzero(hash_bytes(id_bytes, n, 0x6772702d6964ull));
}

inline std::uint64_t group_id_from_split(std::uint64_t parent, std::uint32_t split_index,
                                         std::int32_t color) noexcept {
  const std::uint64_t v[3] = {parent, split_index, static_cast<std::uint64_t>(static_cast<std::int64_t>(color))};
  return nonzero(hash_bytes(v, sizeof v, 0x73706c6974ull));
}

inline std::uint64_t group_id_from_shrink(std::uint64_t parent, std::uint32_t split_index,
                                          const int* excluded, int n_excluded) noexcept {
  const std::uint64_t v[2] = {parent, split_index};
  std::uint64_t h = hash_bytes(v, sizeof v, 0x736872696e6bull);
  if (excluded != nullptr && n_excluded > 0) {
    h = hash_bytes(excluded, sizeof(int) * static_cast<std::size_t>(n_excluded), h);
  }
  return nonzero(h);
}

}  // namespace greyhound::hook
