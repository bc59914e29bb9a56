// bench/hook_overhead: the cost libgreyhound.so adds to one intercepted NCCL call. The NCCL behind it is
// the no-op fixture (tests/fixtures/nccl_fake.cpp), so the figure is the hook's own work: clock read,
// re-entrancy guard, communicator lookup, ring append. Rounds of direct and hooked calls are interleaved
// and the medians compared; a second process repeats it with GREYHOUND_DISABLE=1.
#include <dlfcn.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "greyhound/ring.h"

namespace {

using AllReduceFn = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                     cudaStream_t);

double per_call_ns(AllReduceFn fn, ncclComm_t comm, int calls) {
  float x = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn(&x, &x, 1024, ncclFloat32, ncclSum, comm, nullptr);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
}

// Where the added cost goes: the clock read alone and a ring append alone, same rounds and medians.
template <typename F>
double per_op_ns(F f, int calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
}

std::string clocksource() {
  std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  char buf[64] = "unknown";
  if (f != nullptr) {
    if (std::fgets(buf, sizeof buf, f) == nullptr) std::strcpy(buf, "unknown");
    std::fclose(f);
  }
  std::string s = buf;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const bool child = argc > 1 && std::strcmp(argv[1], "--child") == 0;
  const int rounds = 201, calls = 20000;
  char dir[] = "/tmp/gh-bench-XXXXXX";
  if (!child) {
    if (mkdtemp(dir) == nullptr) return 1;
    setenv("GREYHOUND_SHM_DIR", dir, 1);
    setenv("GREYHOUND_JOB", "bench", 1);
    setenv("GREYHOUND_RANK", "0", 1);
  }
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (nccl == nullptr) {
    std::fprintf(stderr, "hook_overhead: the no-op libnccl.so.2 is not loaded: %s\n", dlerror());
    return 1;
  }
  auto direct = reinterpret_cast<AllReduceFn>(dlsym(nccl, "ncclAllReduce"));
  volatile AllReduceFn hooked_v = &ncclAllReduce;  // resolves to libgreyhound.so (linked first)
  const AllReduceFn hooked = hooked_v;
  if (direct == nullptr || direct == hooked) {
    std::fprintf(stderr, "hook_overhead: could not tell the hook from the no-op NCCL apart\n");
    return 1;
  }
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm = nullptr;
  ncclCommInitRank(&comm, 8, id, 0);  // a known communicator: the lookup path a real job takes

  std::vector<double> d, h;
  per_call_ns(direct, comm, calls);  // warm up
  per_call_ns(hooked, comm, calls);
  for (int r = 0; r < rounds; ++r) {
    d.push_back(per_call_ns(direct, comm, calls));
    h.push_back(per_call_ns(hooked, comm, calls));
  }
  const char* what = child ? "through libgreyhound (GREYHOUND_DISABLE=1)" : "through libgreyhound (recording)";
  if (!child) {
    std::printf("hook_overhead: %d rounds x %d calls of ncclAllReduce into a no-op NCCL (median per call)\n",
                rounds, calls);
    std::printf("  %-44s %7.1f ns   (p10 %.1f, p90 %.1f)\n", "direct call into NCCL", median(d), pct(d, 0.1),
                pct(d, 0.9));
  }
  std::printf("  %-44s %7.1f ns   added %5.1f ns (p10 %.1f, p90 %.1f)%s\n", what, median(h), median(h) - median(d),
              pct(h, 0.1) - pct(d, 0.1), pct(h, 0.9) - pct(d, 0.9), child ? "" : "   [goal <= 50 ns]");
  if (!child) {
    std::string err;
    auto ring = greyhound::RingWriter::create(dir, "greyhound.components.0", 32768, greyhound::RingIdentity{}, &err);
    std::vector<double> c, a;
    greyhound::RecordPayload p{};
    timespec ts{};
    for (int r = 0; r < rounds && ring; ++r) {
      c.push_back(per_op_ns([&] { clock_gettime(CLOCK_MONOTONIC, &ts); }, calls));
      a.push_back(per_op_ns([&] { ring->append(p); }, calls));
    }
    if (ring) {
      std::printf("  of which: clock_gettime(CLOCK_MONOTONIC) %.1f ns (clocksource %s), ring append %.1f ns\n",
                  median(c), clocksource().c_str(), median(a));
    }
  }
  std::fflush(stdout);
  if (child) return 0;

  const pid_t pid = fork();
  if (pid == 0) {
    setenv("GREYHOUND_DISABLE", "1", 1);
    execl("/proc/self/exe", argv[0], "--child", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::system((std::string("rm -rf ") + dir).c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
