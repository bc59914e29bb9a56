// Communicator -> group table of libgreyhound.so. Fixed capacity, allocated statically: lookups (the hot
// path) are lock-free and allocation-free; inserts and removals happen in communicator create/destroy
// calls and take a mutex. When full, new communicators are recorded with group id 0 (and one warning).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace greyhound::hook {

class GroupTable {
 public:
  static constexpr std::size_t kCapacity = 4096;  // power of two

  struct Entry {
    std::atomic<std::uintptr_t> key{0};  // communicator pointer; 0 empty, 1 tombstone
    std::atomic<std::uint64_t> group_id{0};
    std::atomic<std::int32_t> rank{-1};
    std::atomic<std::int32_t> size{-1};
    std::atomic<std::uint32_t> splits{0};  // children made by CommSplit/CommShrink so far
    std::atomic<std::uint64_t> calls{0};   // collectives recorded on it so far (the records' group_seq)
  };

  // Returns the entry of `comm`, or nullptr. Lock-free.
  Entry* find(const void* comm) noexcept {
    const auto key = reinterpret_cast<std::uintptr_t>(comm);
    if (key <= kTombstone) return nullptr;
    std::size_t i = slot_of(key);
    for (std::size_t probes = 0; probes < kCapacity; ++probes, i = (i + 1) & (kCapacity - 1)) {
      const std::uintptr_t k = entries_[i].key.load(std::memory_order_acquire);
      if (k == key) return &entries_[i];
      if (k == kEmpty) return nullptr;
    }
    return nullptr;
  }

  // The communicator of `group_id` (the first live one), or nullptr. A scan of the table: for the pause, not
  // for the hot path.
  void* comm_of(std::uint64_t group_id) noexcept {
    if (group_id == 0) return nullptr;
    for (auto& e : entries_) {
      const std::uintptr_t k = e.key.load(std::memory_order_acquire);
      if (k > kTombstone && e.group_id.load(std::memory_order_relaxed) == group_id) return reinterpret_cast<void*>(k);
    }
    return nullptr;
  }

  // Inserts or overwrites `comm`. Returns false when the table is full.
  bool insert(const void* comm, std::uint64_t group_id, std::int32_t rank, std::int32_t size) noexcept {
    const auto key = reinterpret_cast<std::uintptr_t>(comm);
    if (key <= kTombstone) return false;
    std::lock_guard<std::mutex> lock(mu_);
    Entry* target = find(comm);
    if (target == nullptr) {
      std::size_t i = slot_of(key);
      for (std::size_t probes = 0; probes < kCapacity; ++probes, i = (i + 1) & (kCapacity - 1)) {
        const std::uintptr_t k = entries_[i].key.load(std::memory_order_relaxed);
        if (k == kEmpty || k == kTombstone) {
          target = &entries_[i];
          break;
        }
      }
    }
    if (target == nullptr) return false;
    target->group_id.store(group_id, std::memory_order_relaxed);
    target->rank.store(rank, std::memory_order_relaxed);
    target->size.store(size, std::memory_order_relaxed);
    target->splits.store(0, std::memory_order_relaxed);
    target->calls.store(0, std::memory_order_relaxed);
    target->key.store(key, std::memory_order_release);
    return true;
  }

  void erase(const void* comm) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (Entry* e = find(comm)) e->key.store(kTombstone, std::memory_order_release);
  }

  // After fork(): the child owns none of the parent's communicators.
  void clear_after_fork() noexcept {
    new (&mu_) std::mutex();
    for (auto& e : entries_) e.key.store(kEmpty, std::memory_order_relaxed);
  }

 private:
  static constexpr std::uintptr_t kEmpty = 0;
  static constexpr std::uintptr_t kTombstone = 1;
  static std::size_t slot_of(std::uintptr_t key) noexcept {
    std::uint64_t x = key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<std::size_t>(x) & (kCapacity - 1);
  }
  std::mutex mu_;
  Entry entries_[kCapacity];
};

}  // namespace greyhound::hook
