// greyhoundctl dump --job J [--rank R] [--shm-dir DIR]: every record still in the job's rings, one JSON
// object per line, ring by ring (ascending rank), each in sequence order.
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/clock.h"
#include "common/record_json.h"
#include "greyhound/config.h"
#include "greyhound/ring.h"

namespace greyhound::ctl {

int cmd_dump(const Argv& argv) {
  const Args args(argv, {"job", "rank", "shm-dir"}, {});
  const EnvConfig env = read_env_config();
  const std::string job = args.str("job");
  const std::string dir = args.str("shm-dir", env.shm_dir);
  const bool one_rank = args.has("rank");
  const std::int64_t want_rank = one_rank ? args.integer_in("rank", 0, 0, 1 << 30) : -1;

  struct Ring {
    int rank;
    std::unique_ptr<RingReader> reader;
  };
  std::vector<Ring> rings;
  std::vector<std::string> refused;  // named like a ring, not read: another user's, a link, corrupt
  const std::vector<std::string> paths = list_ring_files(dir, job, &refused);
  for (const std::string& why : refused) std::fprintf(stderr, "greyhoundctl dump: skipping %s\n", why.c_str());
  for (const auto& path : paths) {
    std::string err;
    auto r = RingReader::open(path, &err);
    if (!r) {
      std::fprintf(stderr, "greyhoundctl dump: skipping %s\n", err.c_str());
      continue;
    }
    const int rank = r->header().rank;
    if (one_rank && rank != want_rank) continue;
    rings.push_back({rank, std::move(r)});
  }
  if (rings.empty()) {
    std::fprintf(stderr, "greyhoundctl dump: no ring of job '%s'%s in %s\n", job.c_str(),
                 one_rank ? (" with rank " + std::to_string(want_rank)).c_str() : "", dir.c_str());
    return 1;
  }
  std::stable_sort(rings.begin(), rings.end(), [](const Ring& a, const Ring& b) { return a.rank < b.rank; });

  const std::uint64_t now_ns = clock_ns(CLOCK_MONOTONIC);
  std::vector<RecordPayload> batch;
  for (auto& ring : rings) {
    RingPollStats stats;
    // Read what is there now; do not wait for records still being written.
    const std::uint64_t end = ring.reader->header().write_index.load(std::memory_order_acquire);
    while (ring.reader->next_seq() < end) {
      batch.clear();
      if (ring.reader->poll(batch, 4096, stats, now_ns, 0) == 0 && ring.reader->next_seq() < end) {
        // An incomplete record: poll again with a zero timeout to count it lost and move on.
        ring.reader->poll(batch, 4096, stats, now_ns, 0);
      }
      for (const auto& p : batch) {
        std::fputs(record_to_json(p, ring.rank).dump().c_str(), stdout);
        std::fputc('\n', stdout);
      }
    }
    if (stats.lost > 0 || ring.reader->dropped() > 0) {
      std::fprintf(stderr, "greyhoundctl dump: rank %d: %llu records overwritten before reading, %llu dropped by writers\n",
                   ring.rank, static_cast<unsigned long long>(stats.lost),
                   static_cast<unsigned long long>(ring.reader->dropped()));
    }
  }
  return 0;
}

}  // namespace greyhound::ctl
