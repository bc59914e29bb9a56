// Writer and reader of the shared-memory record ring (layout and rules: ring_layout.h).
//
// RingWriter::append is the hook's hot path: wait-free, no lock, no allocation, no system call; safe from
// any number of threads at once. RingReader is for one reading thread; it may run in another process.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "greyhound/ring_layout.h"

namespace greyhound {

// "greyhound.<job>.<rank>" (rank tag: the global rank, or "p<pid>" when the rank is unknown).
std::string ring_file_name(std::string_view job, std::string_view rank_tag);
// Where the hook leaves its copy of NCCL's graph dump (`graph`) or topology dump for the group `group_id` of the
// ring at `ring_path`, for the agent (docs/validation.md, "NCCL's ring order"): <dir>/nccl-graph.<ring
// file>.<16 hex> or <dir>/nccl-topo.<ring file>.<16 hex>, beside the ring but never taken for one.
std::string nccl_dump_copy_path(const std::string& ring_path, std::uint64_t group_id, bool graph);
// Keeps [A-Za-z0-9_.-] and replaces anything else by '_'; empty becomes "default". At most kRingJobMax-1.
std::string sanitize_job_name(std::string_view job);
// Why `job` cannot name a job in Redis keys and ring names as it is ("" when it can): empty, longer than
// kRingJobMax-1 bytes, or a character outside [A-Za-z0-9_.-]. Where a person or a framework names the job
// (greyhoundctl, the job client), such a name is refused with this reason rather than rewritten.
std::string job_name_error(std::string_view job);

struct RingIdentity {
  std::string job = "default";
  int rank = -1;
  int local_rank = -1;
};

class RingWriter {
 public:
  // Creates <dir>/<file_name> (mode 0600) holding `capacity` records (rounded up to a power of two,
  // at least 64). The file is built under a temporary name and renamed into place, so readers never see a
  // half-made ring; a stale file of the same name is replaced. Returns nullptr and sets *error on failure.
  static std::unique_ptr<RingWriter> create(const std::string& dir, const std::string& file_name,
                                            std::uint64_t capacity, const RingIdentity& id,
                                            std::string* error);
  ~RingWriter();
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  // Appends one record; sets p.seq. Never blocks: see the drop rule in ring_layout.h.
  __attribute__((always_inline)) void append(RecordPayload& p) noexcept {
    const std::uint64_t seq = header_->write_index.fetch_add(1, std::memory_order_relaxed);
    Record& slot = records_[seq & mask_];
    const std::uint64_t busy = 2 * seq + 1;
    const std::uint64_t cur = slot.stamp.load(std::memory_order_relaxed);
    if ((cur & 1u) != 0 || cur >= busy) {  // a lapped writer still in it, or a newer record already
      header_->dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    slot.stamp.store(busy, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    p.seq = seq;
    std::uint64_t w[15];
    std::memcpy(w, &p, sizeof w);
    w[14] = record_check(w);
#pragma GCC unroll 15
    for (int i = 0; i < 15; ++i) {
      std::atomic_ref<std::uint64_t>(slot.words[i]).store(w[i], std::memory_order_relaxed);
    }
    slot.stamp.store(busy + 1, std::memory_order_release);
    // The next slot was last written a whole ring ago and is likely out of cache: fetch both of its cache
    // lines (for writing) now, so that the next call does not wait for the misses.
    const char* ahead = reinterpret_cast<const char*>(&records_[(seq + 1) & mask_]);
    __builtin_prefetch(ahead, 1, 3);
    __builtin_prefetch(ahead + 64, 1, 3);
  }

  const std::string& path() const noexcept { return path_; }
  RingHeader* header() noexcept { return header_; }

 private:
  RingWriter() = default;
  std::string path_;
  RingHeader* header_ = nullptr;
  Record* records_ = nullptr;
  std::uint64_t mask_ = 0;
  std::size_t map_bytes_ = 0;
};

struct RingPollStats {
  std::uint64_t read = 0;  // records returned
  std::uint64_t lost = 0;  // sequence numbers skipped: overwritten before read, never completed, or torn
};

// What RingInCall said at one moment (RingReader::in_call).
struct InCall {
  std::uint64_t enter_ns = 0;
  std::uint64_t group_id = 0;
  std::uint64_t group_seq = 0;
  std::uint32_t op = 0;
  std::uint32_t tid = 0;
};

class RingReader {
 public:
  // Maps an existing ring read-only and validates magic, version, sizes and capacity. Only a regular file
  // (not a symlink) owned by `owner` (default: this process's effective user) and writable by its owner
  // alone is accepted: in a shared directory such as /dev/shm another user could plant a ring.
  static std::unique_ptr<RingReader> open(const std::string& path, std::string* error,
                                          std::optional<uid_t> owner = std::nullopt);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Where the next poll starts: the oldest record still in the ring (default), or only new ones.
  void seek_oldest() noexcept;
  void seek_end() noexcept;

  // Appends up to `max` complete records, in sequence order, to `out`. Stops at the first record not yet
  // complete; a record that stays incomplete for longer than `stuck_timeout_ns` while later ones exist
  // (its writer died or was lapped) is counted lost and skipped. `now_ns` is the caller's monotonic clock.
  std::size_t poll(std::vector<RecordPayload>& out, std::size_t max, RingPollStats& stats,
                   std::uint64_t now_ns, std::uint64_t stuck_timeout_ns = 1'000'000'000ull);

  const RingHeader& header() const noexcept { return *header_; }
  std::uint64_t next_seq() const noexcept { return next_; }
  std::uint64_t capacity() const noexcept { return mask_ + 1; }
  std::uint64_t dropped() const noexcept { return header_->dropped.load(std::memory_order_relaxed); }
  std::string job() const;
  const std::string& path() const noexcept { return path_; }
  bool writer_alive() const noexcept;  // the writer's pid still exists and is not a zombie
  bool writer_exited_normally() const noexcept;  // its process ended through exit() with status 0 (RingLife)
  // The status its process passed to exit(), or nullopt when it did not end through exit().
  std::optional<int> writer_exit_status() const noexcept;
  // The NCCL call the writer is inside now (RingInCall), or nullopt when none (or it changed while read).
  std::optional<InCall> in_call() const noexcept;

  // The control block, writable: maps the header page read-write on first use (the agent's side of
  // RingControl). nullptr with *error when the file cannot be opened for writing.
  RingControl* control(std::string* error);
  // The pause block, writable the same way (the agent's and the framework's side of PauseControl).
  PauseControl* pause(std::string* error);
  // The whole header, writable; nullptr with *error when the file cannot be opened for writing.
  RingHeader* writable_header(std::string* error);

 private:
  RingReader() = default;
  std::string path_;
  const RingHeader* header_ = nullptr;
  const Record* records_ = nullptr;
  std::uint64_t mask_ = 0;
  std::size_t map_bytes_ = 0;
  std::uint64_t next_ = 0;
  std::uint64_t stuck_seq_ = ~0ull;
  std::uint64_t stuck_since_ns_ = 0;
  RingHeader* writable_header_ = nullptr;
  dev_t dev_ = 0;  // the file mapped read-only: the writable mapping must be the same file
  ino_t ino_ = 0;
  uid_t owner_ = 0;
};

// Ring files of `job` in `dir` (all jobs when job is empty), sorted by name. Files named like a ring that
// RingReader::open refuses (corrupt, another user's, a symlink) are left out; with `refused`, each is
// reported there as "path: why" (the agent's lock file is not a ring and is not reported).
std::vector<std::string> list_ring_files(const std::string& dir, std::string_view job,
                                         std::vector<std::string>* refused = nullptr);

// The ring of process `pid` among job's rings in `dir` (a process reading the ring its preloaded hook
// writes: the pause and device-profiling checks), or null when it has none.
std::unique_ptr<RingReader> open_process_ring(const std::string& dir, std::string_view job, pid_t pid);

}  // namespace greyhound
