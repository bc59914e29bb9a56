// greyhound_job_mark_iteration_v1 (greyhound/job.h): the framework's iteration marks in this process's ring,
// the cut of a validation pause (docs/validation.md).
#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "greyhound/config.h"
#include "greyhound/job.h"
#include "greyhound/ring.h"

namespace {

struct MarkState {
  std::mutex mu;
  pid_t pid = 0;                                // the process the ring was found for (fork: search again)
  std::unique_ptr<greyhound::RingReader> ring;  // this process's ring
  greyhound::RingHeader* header = nullptr;      // ... mapped writable
  std::uint64_t next_search_ns = 0;
};

MarkState& state() {
  static MarkState* s = new MarkState();  // never destroyed: a mark at exit must not race a destructor
  return *s;
}

// This process's ring, searched at most once a second while absent.
greyhound::RingHeader* find_ring(MarkState& s) {
  const pid_t me = getpid();
  if (s.pid != me) {
    s.pid = me;
    s.ring.reset();
    s.header = nullptr;
    s.next_search_ns = 0;
  }
  if (s.header != nullptr) return s.header;
  const std::uint64_t now = greyhound::clock_ns(CLOCK_MONOTONIC);
  if (now < s.next_search_ns) return nullptr;
  s.next_search_ns = now + 1'000'000'000ull;
  const greyhound::EnvConfig env = greyhound::read_env_config();
  if (env.disable) return nullptr;
  for (const std::string& path : greyhound::list_ring_files(env.shm_dir, greyhound::sanitize_job_name(env.job))) {
    std::string err;
    auto r = greyhound::RingReader::open(path, &err);
    if (!r || r->header().pid != me) continue;
    greyhound::RingHeader* h = r->writable_header(&err);
    if (h == nullptr) continue;
    s.ring = std::move(r);
    s.header = h;
    return h;
  }
  return nullptr;
}

}  // namespace

extern "C" int greyhound_job_mark_iteration_v1(int64_t iteration) {
  if (iteration < 0) return GREYHOUND_JOB_ERR_INVALID;
  try {
    MarkState& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    greyhound::RingHeader* h = find_ring(s);
    if (h == nullptr) return GREYHOUND_JOB_ERR_UNAVAILABLE;
    // mark_seq first, the mark last (release): the hook reads the mark (acquire), then mark_seq.
    h->pause.mark_seq.store(h->write_index.load(std::memory_order_acquire), std::memory_order_relaxed);
    h->pause.iteration_mark.store(static_cast<std::uint64_t>(iteration) + 1, std::memory_order_release);
    return GREYHOUND_JOB_OK;
  } catch (...) {
    return GREYHOUND_JOB_ERR_INTERNAL;
  }
}
