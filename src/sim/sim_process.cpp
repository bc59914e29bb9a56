#include "sim/sim_process.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/clock.h"

extern "C" std::uint64_t greyhound_sim_vclock_now(std::uint64_t slack_ns);
extern "C" void greyhound_sim_vclock_wait(std::uint64_t t);

namespace greyhound::sim {
namespace {

int env_int(const char* name, int def, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) {
    throw std::runtime_error(std::string(name) + "='" + v + "': must be an integer in [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "]");
  }
  return static_cast<int>(x);
}

SimProcess load() {
  SimProcess p;
  const char* rank_var = std::getenv("GREYHOUND_SIM_RANK") ? "GREYHOUND_SIM_RANK" : "RANK";
  p.rank = env_int(rank_var, 0, 0, 1 << 24);
  if (const char* v = std::getenv("GREYHOUND_SIM_MODEL"); v != nullptr && *v != '\0') {
    const std::string text = read_json_arg(v, "GREYHOUND_SIM_MODEL");
    auto j = parse_bounded(text);
    if (!j) throw std::runtime_error("GREYHOUND_SIM_MODEL: " + j.error());
    p.model = SimModel::parse(*j);
  }
  p.model.gpus_per_node = env_int("GREYHOUND_SIM_GPUS_PER_NODE", p.model.gpus_per_node, 1, 1024);
  p.node = env_int("GREYHOUND_SIM_NODE", p.rank / p.model.gpus_per_node, 0, 1 << 24);
  if (const char* v = std::getenv("GREYHOUND_SIM_FAULTS"); v != nullptr && *v != '\0') {
    try {
      p.faults = FaultSchedule::parse_text(read_json_arg(v, "GREYHOUND_SIM_FAULTS"));
    } catch (const FaultScheduleError& e) {
      throw std::runtime_error(std::string("GREYHOUND_SIM_FAULTS: ") + e.what());
    }
  }
  p.epoch_ns = now_ns();
  if (const char* v = std::getenv("GREYHOUND_SIM_EPOCH_NS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0') {
      throw std::runtime_error(std::string("GREYHOUND_SIM_EPOCH_NS='") + v + "': must be an integer (ns)");
    }
    p.epoch_ns = x;
  }
  if (const char* v = std::getenv("GREYHOUND_SIM_DIR"); v != nullptr && *v != '\0') p.dir = v;
  p.timeout_s = env_int("GREYHOUND_SIM_TIMEOUT_S", 300, 1, 86400);
  p.slack_ns = static_cast<std::uint64_t>(env_int("GREYHOUND_SIM_SLACK_MS", 20, 0, 10000)) * 1'000'000ull;
  return p;
}

}  // namespace

std::string read_json_arg(const std::string& value, const std::string& variable) {
  std::size_t i = value.find_first_not_of(" \t\r\n");
  if (i != std::string::npos && (value[i] == '{' || value[i] == '[')) return value;  // inline JSON
  std::ifstream in(value);
  if (!in) throw std::runtime_error(variable + ": cannot read file '" + value + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const SimProcess& sim_process() {
  static SimProcess* p = [] {
    try {
      return new SimProcess(load());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "greyhound-sim: %s\n", e.what());
      std::fflush(stderr);
      std::_Exit(2);
    }
  }();
  return *p;
}

std::uint64_t now_ns() { return clock_ns(CLOCK_MONOTONIC); }

std::uint64_t seconds_to_ns(double s) { return s <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(s * 1e9)); }

std::uint64_t model_now() { return greyhound_sim_vclock_now(sim_process().slack_ns); }

void model_wait_until(std::uint64_t t) { greyhound_sim_vclock_wait(t); }

void host_launch() {
  const SimProcess& p = sim_process();
  if (p.model.launch_us <= 0) return;
  const std::uint64_t t = model_now();
  const double slow = p.faults.cpu_slowdown(p.rank, p.job_time_s(t));
  model_wait_until(t + seconds_to_ns(p.model.launch_us * 1e-6 * slow));
}

void device_kernel(double amount, bool is_gemm, const std::function<void()>& work) {
  host_launch();
  const SimProcess& sp = sim_process();
  const std::uint64_t t0 = model_now();
  // A kill fault: the process dies here, as a rank does whose host fails or that the OOM killer takes.
  if (sp.faults.killed(sp.rank, sp.job_time_s(t0))) raise(SIGKILL);
  // A hang fault: a kernel that does not finish until the fault's end (no NCCL call meanwhile).
  if (const double until_s = sp.faults.hung_until(sp.rank, sp.job_time_s(t0)); until_s > 0) {
    model_wait_until(sp.epoch_ns + static_cast<std::uint64_t>(until_s * 1e9));
  }
  const double slow = sp.faults.gpu_slowdown(sp.rank, sp.job_time_s(t0));
  work();
  const double s = is_gemm ? gemm_seconds(sp.model, amount, slow)
                           : memory_seconds(sp.model, static_cast<std::uint64_t>(amount), slow);
  model_wait_until(t0 + seconds_to_ns(s));
}

void sim_log(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "greyhound-sim[rank %d pid %d]: %s\n", sim_process().rank, static_cast<int>(getpid()), buf);
}

}  // namespace greyhound::sim
