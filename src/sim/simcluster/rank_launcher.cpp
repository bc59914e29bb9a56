#include "sim/simcluster/rank_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

extern char** environ;

namespace greyhound::sim {

pid_t spawn(const ChildSpec& spec, std::string* error) {
  if (spec.argv.empty()) {
    if (error) *error = spec.name + ": empty command";
    return -1;
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& k : spec.unset_env) env.erase(k);
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argvp;
  for (auto& s : args) argvp.push_back(s.data());
  argvp.push_back(nullptr);
  int out_fd = -1, err_fd = -1;
  if (!spec.stdout_path.empty()) {
    out_fd = ::open(spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (!spec.stderr_path.empty()) {
    err_fd = ::open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if ((!spec.stdout_path.empty() && out_fd < 0) || (!spec.stderr_path.empty() && err_fd < 0)) {
    if (error) *error = spec.name + ": cannot open its log files: " + std::strerror(errno);
    if (out_fd >= 0) ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    return -1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    if (error) *error = spec.name + ": fork failed: " + std::strerror(errno);
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (out_fd >= 0) dup2(out_fd, STDOUT_FILENO);
    if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
    execve(argvp[0], argvp.data(), envp.data());
    const char msg[] = "greyhound-simcluster: exec failed\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent: no race with an early kill
  if (out_fd >= 0) ::close(out_fd);
  if (err_fd >= 0) ::close(err_fd);
  return pid;
}

void stop_all(const std::vector<pid_t>& pids, double grace_s) {
  for (pid_t p : pids) {
    if (p > 0) kill(-p, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  for (pid_t p : pids) {
    if (p <= 0) continue;
    while (std::chrono::steady_clock::now() < deadline) {
      if (kill(p, 0) != 0) break;
      int status = 0;
      if (waitpid(p, &status, WNOHANG) == p) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(-p, SIGKILL);
    int status = 0;
    waitpid(p, &status, WNOHANG);
  }
}

namespace {
// Children wait_all reaped that were not among those it waited for (its waitpid(-1) takes any): their exit
// codes, for wait_child.
std::map<pid_t, int> g_reaped_elsewhere;
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }
}  // namespace

int wait_child(pid_t pid, double wait_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    if (const auto it = g_reaped_elsewhere.find(pid); it != g_reaped_elsewhere.end()) return it->second;
    int status = 0;
    const pid_t p = waitpid(pid, &status, WNOHANG);
    if (p == pid) return exit_code_of(status);
    if (p < 0 || std::chrono::steady_clock::now() >= until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<ChildExit> wait_all(const std::vector<pid_t>& pids, const std::vector<std::string>& names,
                                volatile bool* stop_requested, bool fail_fast,
                                const std::function<void()>& on_tick, int also_fine, double fail_grace_s) {
  std::vector<ChildExit> exits(pids.size());
  std::size_t remaining = pids.size();
  unsigned ticks = 0;
  int seen = 0;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    exits[i].name = names[i];
    exits[i].pid = pids[i];
  }
  while (remaining > 0) {
    int status = 0;
    const pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0 && std::find(pids.begin(), pids.end(), p) == pids.end()) g_reaped_elsewhere[p] = exit_code_of(status);
    if (p > 0) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != p || exits[i].exit_code != -1) continue;
        exits[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        exits[i].order = seen++;
        --remaining;
        if (fail_fast && exits[i].exit_code != 0 && exits[i].exit_code != also_fine) {
          // The others go on for the grace (their own exits are collected meanwhile), then are stopped.
          const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(fail_grace_s);
          const auto running = [&] {
            return std::any_of(exits.begin(), exits.end(), [](const ChildExit& x) { return x.exit_code == -1; });
          };
          while (running() && std::chrono::steady_clock::now() < until && !(stop_requested != nullptr && *stop_requested)) {
            int st = 0;
            const pid_t q = waitpid(-1, &st, WNOHANG);
            if (q > 0 && std::find(pids.begin(), pids.end(), q) == pids.end()) g_reaped_elsewhere[q] = exit_code_of(st);
            for (std::size_t j = 0; q > 0 && j < pids.size(); ++j) {
              if (pids[j] == q && exits[j].exit_code == -1) {
                exits[j].exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                exits[j].order = seen++;
              }
            }
            if (q <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (on_tick && ++ticks % 5 == 0) on_tick();
          }
          std::vector<pid_t> rest;
          for (std::size_t j = 0; j < pids.size(); ++j) {
            if (exits[j].exit_code == -1) rest.push_back(pids[j]);
          }
          stop_all(rest, 2.0);
          for (std::size_t j = 0; j < pids.size(); ++j) {
            if (exits[j].exit_code == -1) exits[j].exit_code = 128 + SIGTERM;
          }
          return exits;
        }
      }
      continue;
    }
    if (stop_requested != nullptr && *stop_requested) {
      std::vector<pid_t> rest;
      for (std::size_t j = 0; j < pids.size(); ++j) {
        if (exits[j].exit_code == -1) rest.push_back(pids[j]);
      }
      stop_all(rest, 5.0);
      for (auto& e : exits) {
        if (e.exit_code == -1) e.exit_code = 128 + SIGTERM;
      }
      return exits;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (on_tick && ++ticks % 5 == 0) on_tick();
  }
  if (on_tick) on_tick();
  return exits;
}

std::string tail_file(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += l + "\n";
  return out;
}

}  // namespace greyhound::sim
