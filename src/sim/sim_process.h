// Per-process state shared by the CPU stand-ins (each stand-in library links its own copy; all read the
// same environment, so they agree): who this rank is, where it sits, the model, the fault schedule, the
// job's clock. Loaded once, at library load; a bad environment ends the process at once with a message
// naming the variable and field (the stand-ins are test fixtures: failing fast beats guessing).
//
// Environment:
//   GREYHOUND_SIM_RANK (else RANK)   global rank; default 0
//   GREYHOUND_SIM_NODE               virtual node; default rank / gpus_per_node
//   GREYHOUND_SIM_GPUS_PER_NODE      overrides the model's gpus_per_node
//   GREYHOUND_SIM_MODEL              timing model (inline JSON or file), see sim_model.h
//   GREYHOUND_SIM_FAULTS             fault schedule (inline JSON or file), see fault_schedule.h
//   GREYHOUND_SIM_EPOCH_NS           CLOCK_MONOTONIC ns of job start (fault times count from it);
//                                    default: when this process loaded the stand-in
//   GREYHOUND_SIM_DIR                where communicator segments live; default /dev/shm
//   GREYHOUND_SIM_TIMEOUT_S          deadline of every wait for peers; default 300
//   GREYHOUND_SIM_SLACK_MS           scheduling delay the modeled clock absorbs (vclock.cpp); default 20
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "sim/fault_schedule.h"
#include "sim/sim_model.h"

namespace greyhound::sim {

struct SimProcess {
  int rank = 0;
  int node = 0;
  SimModel model;
  FaultSchedule faults;
  std::uint64_t epoch_ns = 0;
  std::string dir = "/dev/shm";
  double timeout_s = 300.0;
  std::uint64_t slack_ns = 20'000'000;

  // Job time in seconds of a monotonic timestamp.
  double job_time_s(std::uint64_t mono_ns) const {
    return mono_ns >= epoch_ns ? static_cast<double>(mono_ns - epoch_ns) * 1e-9
                               : -static_cast<double>(epoch_ns - mono_ns) * 1e-9;
  }
};

// The process's state, loaded on first use (thread-safe). Exits with status 2 on a bad environment.
const SimProcess& sim_process();

// Reads inline JSON (text starting with '{' or '[') or the file it names. Throws std::runtime_error.
std::string read_json_arg(const std::string& value, const std::string& variable);

std::uint64_t now_ns();  // the real CLOCK_MONOTONIC (deadlines, liveness)

// The modeled clock (vclock.cpp): where this process's modeled timeline stands (a little behind the real
// clock at most: SimProcess::slack_ns), and the end of a modeled operation (advance to t and sleep until
// then). Arrivals, starts and ends of modeled operations use these, never now_ns().
std::uint64_t model_now();
void model_wait_until(std::uint64_t t);
std::uint64_t seconds_to_ns(double s);

// Host-side cost of launching one kernel or collective: launch_us scaled by the rank's CPU contention.
void host_launch();

// One modeled kernel: a launch, then `work` (the real computation), then the call lasts its modeled device
// time (a GEMM of `amount` FLOPs, else a memory-bound kernel of `amount` bytes), scaled by the rank's GPU
// fault. A kill fault ends the process here, a hang fault holds the kernel until the fault's end.
void device_kernel(double amount, bool is_gemm, const std::function<void()>& work);

// Prints "greyhound-sim[rank R]: ..." to stderr.
void sim_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace greyhound::sim
