// greyhound_dlopen_job LIBRARY CALLS: loads LIBRARY with RTLD_LOCAL (as Python loads an extension module
// and what it links) and runs its gh_local_job_run(CALLS); exits with what it returns (100+: the loading).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: greyhound_dlopen_job LIBRARY CALLS\n");
    return 100;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "greyhound_dlopen_job: %s\n", dlerror());
    return 101;
  }
  using Run = int (*)(int);
  const auto run = reinterpret_cast<Run>(dlsym(lib, "gh_local_job_run"));
  if (run == nullptr) return 102;
  return run(std::atoi(argv[2]));
}
