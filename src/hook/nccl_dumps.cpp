#include "nccl_dumps.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>

#include "greyhound/ring.h"
#include "runtime.h"

namespace greyhound::hook {
namespace {

constexpr std::size_t kMaxDumpBytes = 4u << 20;  // a graph dump of 64 channels x 72 GPUs is ~100 KiB

// NCCL's dump variables as the job set them, and where this process's NCCL writes instead (below).
struct DumpEnv {
  std::string graph, topo;            // the job's NCCL_GRAPH_DUMP_FILE, NCCL_TOPO_DUMP_FILE ("": unset)
  std::string graph_here, topo_here;  // this process's own paths, which NCCL writes to ("": not redirected)
  int graph_rank = 0, topo_rank = 0;
  pid_t pid = 0;  // the process the paths are of (a forked child inherits them, and must leave them alone)
};

// As NCCL reads its integer parameters (strtoll, base 0); NCCL's default 0 when unset.
int env_rank(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  errno = 0;
  const long long x = std::strtoll(v, nullptr, 0);
  return errno == 0 && x >= 0 && x < (1 << 24) ? static_cast<int>(x) : -1;
}

// The job's own choice of path for NCCL's variable `nccl`. A value ending in ".greyhound.<pid>" is what the
// hook of a parent process set, standing for the path kept in `kept` ("": the job set none); anything else
// (another path, or none) is the job's own, made after that parent.
std::optional<std::string> jobs_path(const char* nccl, const char* kept) {
  const char* now = std::getenv(nccl);
  const char* k = std::getenv(kept);
  if (now == nullptr || *now == '\0') return std::nullopt;
  const std::string v = now;
  const std::size_t at = v.rfind(".greyhound.");
  if (k != nullptr && at != std::string::npos && at + 11 < v.size() &&
      v.find_first_not_of("0123456789", at + 11) == std::string::npos) {
    return *k != '\0' ? std::optional<std::string>(k) : std::nullopt;
  }
  return v;
}

// A path the hook may move NCCL's dump away from and back to: a plain file (absent, or a regular file
// reached by no link) in a directory this process can write. "/dev/stdout", a FIFO or a link are left to NCCL.
bool plain_path(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return false;
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  return access(dir.c_str(), W_OK | X_OK) == 0;
}

// Filled before main by redirect_nccl_dumps (a function's static: made on first use, whatever order the
// library's initialisers run in).
DumpEnv& dump_env() {
  static DumpEnv env;
  return env;
}

// Every process of a node writes NCCL's dumps at the one path the variable names, each communicator's over
// the last, and the processes make theirs at the same moments: a copy taken after a communicator could be
// another process's. So, before main (one thread), the hook points NCCL at paths of this process's own, the
// job's paths with ".greyhound.<pid>" added, and once it has read a dump it renames it to the job's path:
// the job finds its dumps where it asked for them, whole (a rename replaces a file at once). The job's
// paths are kept in GREYHOUND_NCCL_GRAPH_DUMP_FILE / GREYHOUND_NCCL_TOPO_DUMP_FILE for the processes it
// starts (a launcher under the hook hands its own paths down). A job that sets no topology dump gets one
// beside the graph dump's, removed once read (the graph dump names devices; the topology dump their
// ranks), dumped on the graph dump's rank unless the job chose NCCL_TOPO_DUMP_FILE_RANK.
__attribute__((constructor)) void redirect_nccl_dumps() {
  const char* disable = std::getenv("GREYHOUND_DISABLE");
  if (disable != nullptr && std::strcmp(disable, "1") == 0) return;
  const std::optional<std::string> graph = jobs_path("NCCL_GRAPH_DUMP_FILE", "GREYHOUND_NCCL_GRAPH_DUMP_FILE");
  if (!graph) return;
  const std::optional<std::string> topo = jobs_path("NCCL_TOPO_DUMP_FILE", "GREYHOUND_NCCL_TOPO_DUMP_FILE");
  // A path NCCL must write as it is (a device, a FIFO, a link, a read-only directory): no redirect at all.
  if (!plain_path(*graph) || (topo && !plain_path(*topo))) return;
  DumpEnv& g_env = dump_env();
  g_env.graph = *graph;
  g_env.topo = topo.value_or("");
  const std::string suffix = ".greyhound." + std::to_string(getpid());
  g_env.pid = getpid();
  g_env.graph_here = g_env.graph + suffix;
  g_env.topo_here = (g_env.topo.empty() ? g_env.graph + ".topo" : g_env.topo) + suffix;
  // The topology dump the hook adds is made on the graph dump's rank (one the job set stays as it is).
  if (!topo) {
    const char* graph_rank = std::getenv("NCCL_GRAPH_DUMP_FILE_RANK");
    setenv("NCCL_TOPO_DUMP_FILE_RANK", graph_rank != nullptr && *graph_rank != '\0' ? graph_rank : "0", 1);
  }
  setenv("GREYHOUND_NCCL_GRAPH_DUMP_FILE", g_env.graph.c_str(), 1);
  setenv("GREYHOUND_NCCL_TOPO_DUMP_FILE", g_env.topo.c_str(), 1);
  setenv("NCCL_GRAPH_DUMP_FILE", g_env.graph_here.c_str(), 1);
  setenv("NCCL_TOPO_DUMP_FILE", g_env.topo_here.c_str(), 1);
  g_env.graph_rank = env_rank("NCCL_GRAPH_DUMP_FILE_RANK");
  g_env.topo_rank = env_rank("NCCL_TOPO_DUMP_FILE_RANK");
  std::atexit([] { settle_nccl_dumps(); });
}

void log_once(std::atomic<bool>& done, const char* fmt, const char* a, const char* b) {
  if (!done.exchange(true)) log_line(LogLevel::kWarn, fmt, a, b);
}

// The file's text when it was written since `since_real_ns` (wall clock) and is at most kMaxDumpBytes; false
// otherwise, with *why ("<path> is ...").
bool read_fresh(const std::string& path, std::int64_t since_real_ns, std::string* out, const char** why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    *why = "cannot be opened";
    return false;
  }
  struct stat st {};
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (!ok) *why = "is not a regular file";
  const std::int64_t mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (ok && mtime_ns < since_real_ns) {
    ok = false;
    *why = "was not written by this communicator's creation";
  }
  if (ok && (st.st_size <= 0 || static_cast<std::uint64_t>(st.st_size) > kMaxDumpBytes)) {
    ok = false;
    *why = "is empty or larger than 4 MiB";
  }
  if (ok) {
    out->resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < out->size()) {
      const ssize_t n = ::read(fd, out->data() + got, out->size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    out->resize(got);
    ok = got > 0;
    if (!ok) *why = "could not be read";
  }
  ::close(fd);
  return ok;
}

// Writes `text` at `path` as a new file of this user's (mode 0600), through a temporary name never followed
// through a link, so the agent never reads half of it.
bool write_private(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  std::size_t put = 0;
  bool ok = fchmod(fd, 0600) == 0;
  while (ok && put < text.size()) {
    const ssize_t n = ::write(fd, text.data() + put, text.size() - put);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) put += static_cast<std::size_t>(n);
  }
  ok = ::close(fd) == 0 && ok;
  if (ok) ok = ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}

}  // namespace

namespace {
// Moves this process's dump at `here` to the job's path `there` ("": removes it). Only what is there (this
// process's NCCL may have dumped nothing), and only a regular file of this user's: a link planted at that name
// in a shared directory is removed, never moved to the job's path.
void settle(const std::string& here, const std::string& there) {
  struct stat st {};
  if (lstat(here.c_str(), &st) != 0) return;
  if (there.empty() || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    ::unlink(here.c_str());
  } else {
    ::rename(here.c_str(), there.c_str());
  }
}
}  // namespace

void settle_nccl_dumps() noexcept {
  const DumpEnv& env = dump_env();
  if (env.graph_here.empty() || env.pid != getpid()) return;
  settle(env.graph_here, env.graph);
  settle(env.topo_here, env.topo);
}

void keep_nccl_dumps(const std::string& ring_path, std::uint64_t group_id, int comm_rank, bool made,
                     std::uint64_t call_start_ns) noexcept {
  try {
    const DumpEnv& env = dump_env();
    if (env.graph_here.empty() || env.pid != getpid()) return;
    // Only the rank NCCL dumped on reads and settles: another thread of this process making its own rank of a
    // communicator at the same moment must not move the files away from under it.
    if (!made || comm_rank != env.graph_rank) return;
    static std::atomic<bool> other_rank{false}, unreadable{false}, unwritable{false};
    const bool copy = group_id != 0 && !ring_path.empty();
    if (copy && env.topo_rank != env.graph_rank) {
      log_once(other_rank,
               "NCCL_TOPO_DUMP_FILE_RANK differs from NCCL_GRAPH_DUMP_FILE_RANK%s%s: the graph dump names devices and "
               "the topology dump of another rank cannot give their ranks, so validation follows group-rank order",
               "", "");
    }
    std::string graph, topo;
    const char* why = "";
    const std::string* unread = nullptr;
    if (copy && env.topo_rank == env.graph_rank) {
      // The call's start on the wall clock (file times are): now, less how long the call took, less a minute
      // (file times come from a coarse clock, or another machine's on a network file system). Older is a dump
      // left from before this call (a non-blocking communicator's, say): not this communicator's.
      timespec real{}, mono{};
      clock_gettime(CLOCK_REALTIME, &real);
      clock_gettime(CLOCK_MONOTONIC, &mono);
      const std::int64_t now_real = static_cast<std::int64_t>(real.tv_sec) * 1'000'000'000 + real.tv_nsec;
      const std::int64_t now_mono = static_cast<std::int64_t>(mono.tv_sec) * 1'000'000'000 + mono.tv_nsec;
      const std::int64_t since = now_real - (now_mono - static_cast<std::int64_t>(call_start_ns)) - 60'000'000'000;
      unread = !read_fresh(env.topo_here, since, &topo, &why)    ? &env.topo_here
               : !read_fresh(env.graph_here, since, &graph, &why) ? &env.graph_here
                                                                  : nullptr;
      if (unread != nullptr) {
        log_once(unreadable, "NCCL's dump %s %s: validation follows group-rank order for this communicator",
                 unread->c_str(), why);
      }
    }
    // The job's dumps where it asked for them, whatever was read (a topology dump it did not ask for removed).
    settle_nccl_dumps();
    if (!copy || unread != nullptr || graph.empty()) return;
    // The topology first: the agent looks for the graph's copy (and, without one, removes the topology's).
    const std::string topo_copy = nccl_dump_copy_path(ring_path, group_id, false);
    if (!write_private(topo_copy, topo) || !write_private(nccl_dump_copy_path(ring_path, group_id, true), graph)) {
      ::unlink(topo_copy.c_str());
      log_once(unwritable, "cannot copy NCCL's dumps next to the ring %s%s", ring_path.c_str(), "");
    }
  } catch (...) {
    // Out of memory: the dumps are not worth failing the job's call for.
  }
}

}  // namespace greyhound::hook
