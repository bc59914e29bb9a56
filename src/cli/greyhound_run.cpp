// greyhound-run CMD...: the launcher operators put in front of their job (`greyhound-run torchrun ... train.py`).
// Prepends libgreyhound.so to LD_PRELOAD, sets GREYHOUND_JOB (and the other GREYHOUND_* given as flags) for
// everything CMD starts, starts this node's greyhound-agent unless one already runs for the job (the agent
// holds a lock; see src/agent/main.cpp), then replaces itself with CMD, so signals and the exit status are
// CMD's own. With --print-env instead of CMD it starts the agent the same way and prints what it would set
// as `export NAME=value` lines: what a Slurm TaskProlog prints for Slurm to apply to each task (deploy/slurm,
// docs/deploy.md).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/private_file.h"
#include "common/redis_client.h"
#include "greyhound/config.h"
#include "greyhound/ring.h"

namespace fs = std::filesystem;

namespace {

std::string self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// True when no agent holds the job's lock on this node. A lock file this user may not trust (a symlink,
// another user's) is an error in *error: the agent would refuse it too.
bool agent_lock_free(const std::string& lock_path, std::string* error) {
  const int fd = greyhound::open_private_file(lock_path, error);
  if (fd < 0) return false;
  const bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // releases it again: the agent takes it itself
  return free;
}

void usage() {
  std::printf(
      "usage: greyhound-run [--job J] [--node N] [--redis URL] [--shm-dir DIR] [--no-agent]\n"
      "                     [--agent-log FILE] [--agent-args \"ARGS\"] ([--] CMD [ARGS...] | --print-env)\n"
      "Runs CMD with libgreyhound.so preloaded and starts this node's greyhound-agent once. --print-env: start\n"
      "the agent and print the environment as export lines instead (a Slurm TaskProlog's output).\n");
}


}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> argvv(argv + 1, argv + argc);
  greyhound::hide_redis_passwords(argc, argv, "greyhound-run");
  std::string job, node, redis, shm_dir, agent_log, agent_args;
  bool start_agent = true, print_env = false;
  std::vector<std::string> cmd;
  try {
    const greyhound::Args a(argvv, {"job", "node", "redis", "shm-dir", "agent-log", "agent-args"},
                            {"no-agent", "help", "print-env"}, true);
    if (a.flag("help")) {
      usage();
      return 0;
    }
    const greyhound::EnvConfig env = greyhound::read_env_config();
    const std::string asked = a.str("job", env.job);
    job = greyhound::sanitize_job_name(asked);
    if (job != asked) {  // the job and its agent both go by the name set below; said, never silently
      std::fprintf(stderr, "greyhound-run: %s; the job is named '%s' (GREYHOUND_JOB) instead\n",
                   greyhound::job_name_error(asked).c_str(), job.c_str());
    }
    node = a.str("node", "");
    redis = a.str("redis", "");
    shm_dir = a.str("shm-dir", env.shm_dir);
    if (shm_dir.empty()) throw greyhound::ArgError("--shm-dir must name a directory");
    agent_log = a.str("agent-log", "");
    agent_args = a.str("agent-args", "");
    start_agent = !a.flag("no-agent");
    cmd = a.rest();
    print_env = a.flag("print-env");
    if (print_env && !cmd.empty()) throw greyhound::ArgError("--print-env runs no command");
    if (!print_env && cmd.empty()) throw greyhound::ArgError("no command to run");
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-run: %s\n", e.what());
    usage();
    return 2;
  }

  const std::string bin = self_dir();
  const std::string hook = fs::weakly_canonical(bin + "/../lib/libgreyhound.so").string();
  if (access(hook.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "greyhound-run: %s not found; running the command without greyhound\n", hook.c_str());
  } else {
    const char* pre = std::getenv("LD_PRELOAD");
    std::string value = hook;
    if (pre != nullptr && *pre != '\0' && std::string(pre).find(hook) == std::string::npos) value += ":" + std::string(pre);
    setenv("LD_PRELOAD", value.c_str(), 1);
  }
  setenv("GREYHOUND_JOB", job.c_str(), 1);
  setenv("GREYHOUND_SHM_DIR", shm_dir.c_str(), 1);
  if (!redis.empty()) setenv("GREYHOUND_REDIS", redis.c_str(), 1);
  if (!node.empty()) setenv("GREYHOUND_NODE", node.c_str(), 1);

  const std::string lock = shm_dir + "/" + greyhound::ring_file_name(job, "agent.lock");
  int agent_status = 0;  // the agent's exit status when it left at once (bad flags, no lock file), else 0
  std::string lock_error;  // a lock file this user may not trust: no agent is started
  if (start_agent && agent_lock_free(lock, &lock_error)) {
    const std::string agent = bin + "/greyhound-agent";
    const pid_t pid = fork();
    if (pid == 0) {
      setsid();  // the agent outlives this launcher's session and is not hit by the job's Ctrl-C
      unsetenv("LD_PRELOAD");
      const std::string log = agent_log.empty() ? "/dev/null" : agent_log;
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      // Never the launcher's own output: a Slurm TaskProlog's stdout is a pipe slurmstepd reads to its end.
      if (fd < 0) fd = ::open("/dev/null", O_WRONLY);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      const int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, STDIN_FILENO);
      std::vector<std::string> args = {agent};
      for (std::size_t at = 0; !agent_args.empty() && at != std::string::npos;) {  // space-separated extras
        const std::size_t sp = agent_args.find(' ', at);
        const std::string piece = agent_args.substr(at, sp == std::string::npos ? std::string::npos : sp - at);
        if (!piece.empty()) args.push_back(piece);
        at = sp == std::string::npos ? sp : sp + 1;
      }
      std::vector<char*> av;
      for (auto& s : args) av.push_back(s.data());
      av.push_back(nullptr);
      // Detach fully: the agent is reparented to init once this intermediate child exits. An agent that
      // cannot start (bad flags, an unwritable lock) leaves within milliseconds: the intermediate child
      // watches it for half a second and passes such a status on.
      const pid_t agent_pid = fork();
      if (agent_pid == 0) {
        execv(agent.c_str(), av.data());
        std::fprintf(stderr, "greyhound-run: cannot start %s: %s\n", agent.c_str(), std::strerror(errno));
        _exit(127);
      }
      if (agent_pid < 0) _exit(126);
      for (int i = 0; i < 50; ++i) {
        int st = 0;
        if (waitpid(agent_pid, &st, WNOHANG) == agent_pid) {
          _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
        }
        usleep(10'000);
      }
      _exit(0);
    }
    if (pid > 0) {
      int status = 0;
      if (waitpid(pid, &status, 0) == pid) agent_status = WIFEXITED(status) ? WEXITSTATUS(status) : 126;
    } else {
      agent_status = 126;
    }
  }
  if (agent_status != 0 || !lock_error.empty()) {
    // The job is never held up by greyhound: it runs, unwatched on this node, and says so.
    const char* outcome =
        print_env ? "nothing exported: the task runs without greyhound" : "the command runs without the node's agent";
    if (!lock_error.empty()) {
      std::fprintf(stderr, "greyhound-run: cannot use the agent lock %s (use a --shm-dir only this user can write to); %s\n",
                   lock_error.c_str(), outcome);
    } else {
      const std::string where = agent_log.empty() ? "--agent-log FILE keeps its reason" : "its log: " + agent_log;
      std::fprintf(stderr, "greyhound-run: greyhound-agent exited at once with status %d (%s); %s\n", agent_status,
                   where.c_str(), outcome);
    }
    if (print_env) return 1;
  }

  if (print_env) {
    // Slurm takes everything after the '=' as the value, as it is (no shell quoting): a value with a newline
    // cannot be said this way.
    for (const char* name : {"LD_PRELOAD", "GREYHOUND_JOB", "GREYHOUND_SHM_DIR", "GREYHOUND_REDIS", "GREYHOUND_NODE"}) {
      const char* v = std::getenv(name);
      if (v == nullptr || *v == '\0') continue;
      if (std::strchr(v, '\n') != nullptr) {
        std::fprintf(stderr, "greyhound-run: %s holds a newline: not exported\n", name);
        continue;
      }
      std::printf("export %s=%s\n", name, v);
    }
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  std::vector<char*> av;
  for (auto& s : cmd) av.push_back(s.data());
  av.push_back(nullptr);
  execvp(av[0], av.data());
  std::fprintf(stderr, "greyhound-run: cannot run %s: %s\n", av[0], std::strerror(errno));
  return 127;
}
