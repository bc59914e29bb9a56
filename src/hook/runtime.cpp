#include "runtime.h"

#include "nccl_dumps.h"

#include "gpu_timer.h"

#include "common/private_file.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace greyhound::hook {

GH_TLS bool t_in_hook = false;
GH_TLS int t_group_depth = 0;
GH_TLS std::uint32_t t_tid = 0;

Runtime g_runtime;

namespace {

std::atomic<bool> g_forked_child{false};
std::atomic<bool> g_atfork_registered{false};

void atfork_child() {
  // The child is a new process: it must not write into its parent's ring nor use its communicators.
  Runtime& r = g_runtime;
  r.ring = nullptr;  // the parent's mapping stays mapped in the child, unused
  r.groups.clear_after_fork();
  t_in_hook = false;
  t_group_depth = 0;
  t_tid = 0;
  GpuTimer::forget_after_fork();
  g_forked_child.store(true, std::memory_order_relaxed);
  r.mode.store(kUninit, std::memory_order_release);
}

std::string rank_tag(const EnvConfig& cfg) {
  return cfg.rank >= 0 ? std::to_string(cfg.rank) : "p" + std::to_string(getpid());
}

// The ring file name for this process. A live other process holding the plain name (two processes claim
// one rank) or a forked child gets a pid suffix, so no ring is ever shared by two writers' processes.
std::string choose_ring_name(const EnvConfig& cfg) {
  const std::string plain = ring_file_name(cfg.job, rank_tag(cfg));
  if (g_forked_child.load(std::memory_order_relaxed)) {
    return plain + ".p" + std::to_string(getpid());
  }
  // A file at the plain name that this user may not trust (another user's, a symlink, a FIFO) is left alone:
  // the rename would fail on it in a sticky directory, and the agent refuses it anyway.
  struct stat st {};
  if (lstat((cfg.shm_dir + "/" + plain).c_str(), &st) == 0 && !file_trust_problem(st, geteuid()).empty()) {
    return plain + ".p" + std::to_string(getpid());
  }
  std::string err;
  if (auto existing = RingReader::open(cfg.shm_dir + "/" + plain, &err)) {
    if (existing->header().pid != getpid() && existing->writer_alive()) {
      return plain + ".p" + std::to_string(getpid());
    }
  }
  return plain;
}

}  // namespace

std::uint32_t fetch_tid() noexcept {
  t_tid = static_cast<std::uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

void log_line(LogLevel level, const char* fmt, ...) noexcept {
  if (level < g_runtime.log_level || g_runtime.log_level == LogLevel::kOff) return;
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "greyhound[%d]: ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  const int m = std::vsnprintf(buf + n, sizeof buf - static_cast<std::size_t>(n) - 1, fmt, ap);
  va_end(ap);
  n = std::min<int>(n + std::max(m, 0), static_cast<int>(sizeof buf) - 2);
  buf[n++] = '\n';
  const int saved = errno;
  ssize_t ignored = ::write(STDERR_FILENO, buf, static_cast<std::size_t>(n));
  (void)ignored;
  errno = saved;
}

namespace {

// The loaded libraries whose file name begins with a prefix (dl_iterate_phdr's callback: it only copies
// names; dlopen is called after it returns, outside the loader's lock). In load order: with two copies
// loaded (two frameworks' NCCLs), the first has the name.
struct LoadedLibraries {
  const char* prefix;
  std::size_t prefix_len;
  std::vector<std::string> paths;
};

int collect_loaded(dl_phdr_info* info, std::size_t, void* data) {
  auto* found = static_cast<LoadedLibraries*>(data);
  const char* path = info->dlpi_name;
  if (path == nullptr || path[0] == '\0') return 0;
  const char* slash = std::strrchr(path, '/');
  const char* base = slash != nullptr ? slash + 1 : path;
  if (std::strncmp(base, found->prefix, found->prefix_len) == 0) found->paths.emplace_back(path);
  return 0;
}

}  // namespace

void* resolve_in_loaded(const char* name, const char* prefix, void* self) noexcept {
  try {
    LoadedLibraries found{prefix, std::strlen(prefix), {}};
    dl_iterate_phdr(collect_loaded, &found);
    void* fn = nullptr;
    for (const std::string& path : found.paths) {
      void* lib = dlopen(path.c_str(), RTLD_NOLOAD | RTLD_LAZY);  // already loaded: a reference, no load
      if (lib == nullptr) continue;
      void* f = dlsym(lib, name);
      if (f != nullptr && f != self) {
        fn = f;  // the library stays referenced: never unloaded under a pointer we keep
        break;
      }
      dlclose(lib);  // the reference just taken; the library stays loaded by whoever loaded it
    }
    dlerror();  // our failed lookups leave nothing for the job's next dlerror()
    return fn;
  } catch (...) {  // out of memory while listing: not found, the call fails as before
    return nullptr;
  }
}

void* resolve_real(const char* name, void* self) noexcept {
  const int saved = errno;
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == self) fn = nullptr;  // we were loaded after NCCL, not before it
  if (fn == nullptr) fn = resolve_in_loaded(name, "libnccl.so", self);
  if (fn == nullptr) {
    log_line(LogLevel::kError, "%s: the real NCCL function is not loaded in this process (%s)", name,
             "is libnccl.so.2 linked by the job?");
  }
  errno = saved;
  return fn;
}

// At exit() (or a return from main): the ring says this process ended, and with which status, so that the
// agent tells a finished rank from one that failed. A process killed by a signal never gets here.
void mark_exited(int status, void*) {
  settle_nccl_dumps();
  Runtime& r = g_runtime;
  if (r.ring == nullptr) return;  // a forked child without a ring of its own (atfork_child cleared it)
  RingHeader* h = r.ring->header();
  h->life.exit_status = status & 0xff;  // what the parent sees
  h->life.exited_ns = monotonic_ns();
  h->life.exited.store(1, std::memory_order_release);
}

int ensure_init() noexcept {
  Runtime& r = g_runtime;
  int mode = r.mode.load(std::memory_order_acquire);
  if (mode != kUninit && mode != kInitialising) return mode;
  int expected = kUninit;
  if (!r.mode.compare_exchange_strong(expected, kInitialising, std::memory_order_acq_rel)) {
    // Another thread is creating the ring (a file and a mapping: milliseconds). Wait for it, boundedly,
    // so that a job whose threads all start at once loses no record; past the bound, pass through.
    for (int i = 0; i < 4000 && expected == kInitialising; ++i) {
      const timespec pause{0, 50'000};
      nanosleep(&pause, nullptr);
      expected = r.mode.load(std::memory_order_acquire);
    }
    return expected;
  }
  const int saved_errno = errno;
  if (!g_atfork_registered.exchange(true)) pthread_atfork(nullptr, nullptr, &atfork_child);

  int result = kPassThrough;
  try {
    EnvConfig cfg = read_env_config();
    r.log_level = cfg.log_level;
    for (const auto& w : cfg.warnings) log_line(LogLevel::kWarn, "%s", w.c_str());
    if (cfg.disable) {
      log_line(LogLevel::kInfo, "GREYHOUND_DISABLE is set: pass-through");
    } else {
      std::string err;
      const std::string name = choose_ring_name(cfg);
      RingIdentity id{cfg.job, cfg.rank, cfg.local_rank};
      auto writer = RingWriter::create(cfg.shm_dir, name, cfg.ring_records, id, &err);
      if (writer) {
        r.ring = writer.release();  // lives for the process
        static std::atomic<bool> exit_hook{false};
        if (!exit_hook.exchange(true)) on_exit(&mark_exited, nullptr);
        log_line(LogLevel::kInfo, "recording NCCL calls into %s", r.ring->path().c_str());
        result = kRecording;
      } else {
        log_line(LogLevel::kWarn, "cannot create the record ring (%s): NCCL calls pass through unrecorded",
                 err.c_str());
      }
    }
  } catch (...) {
    log_line(LogLevel::kWarn, "initialisation failed: NCCL calls pass through unrecorded");
    result = kPassThrough;
  }
  r.mode.store(result, std::memory_order_release);
  errno = saved_errno;
  return result;
}

}  // namespace greyhound::hook
