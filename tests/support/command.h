// Runs a shell command line for a test and collects what it printed on stdout (add " 2>&1" to the line for
// stderr too) and its exit status (-1 when it did not exit normally or could not start).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace greyhound::test {

struct CommandOutcome {
  int status = -1;
  std::string out;
};

inline CommandOutcome run_command_line(const std::string& cmd) {
  CommandOutcome o;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) o.out += buf.data();
  const int raw = pclose(p);
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return o;
}

}  // namespace greyhound::test
