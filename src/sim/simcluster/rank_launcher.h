// Starting, watching and stopping the rank processes of a simulated job (greyhound-simcluster).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace greyhound::sim {

struct ChildSpec {
  std::string name;                          // for messages: "rank 3", "agent node 1", ...
  std::vector<std::string> argv;             // argv[0] is the executable path
  std::map<std::string, std::string> env;    // added to (and overriding) the launcher's environment
  std::vector<std::string> unset_env;        // removed from the environment
  std::string stdout_path;                   // empty: inherit
  std::string stderr_path;                   // empty: inherit
};

struct ChildExit {
  std::string name;
  pid_t pid = -1;
  int exit_code = -1;  // 128 + signal when killed by a signal
  int order = -1;      // 0 for the first child seen to exit, 1 for the next, ...; -1: stopped by wait_all
};

// Starts a child in its own process group. Returns its pid, or -1 with *error set.
pid_t spawn(const ChildSpec& spec, std::string* error);

// Sends SIGTERM to the process group of each pid, waits up to grace_s, then SIGKILLs what is left.
void stop_all(const std::vector<pid_t>& pids, double grace_s);

// Waits for every pid (each in `names` order); returns their exits. Stops early, killing the others,
// when `stop_requested` becomes true (signal handler) or one child fails (exits with neither 0 nor
// `also_fine`) and `fail_fast` is set: after `fail_grace_s` (as a job launcher's monitor notices a dead worker
// only at its next look; meanwhile the others go on, or wait in a collective for the dead one, and
// greyhound's agents can see the fail-stop). `on_tick` (optional) runs about every 100 ms while waiting.
std::vector<ChildExit> wait_all(const std::vector<pid_t>& pids, const std::vector<std::string>& names,
                                volatile bool* stop_requested, bool fail_fast,
                                const std::function<void()>& on_tick = {}, int also_fine = 0,
                                double fail_grace_s = 0);

// The exit code of child `pid` (128 + signal when killed), waiting up to `wait_s` for it; -1 when it is still
// running then (or is no child of this process). Children that wait_all reaped meanwhile are answered too.
int wait_child(pid_t pid, double wait_s);

// Last `lines` lines of a text file ("" if unreadable).
std::string tail_file(const std::string& path, int lines);

}  // namespace greyhound::sim
