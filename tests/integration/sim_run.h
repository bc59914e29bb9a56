// Shared by the end-to-end tests: run greyhound-simcluster (8 ranks, TP2 x DP2 x PP2, by default on 2
// virtual nodes of 4 GPUs) in a directory of its own and read back what it left there.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/localiser.h"
#include "greyhound/hash.h"
#include "sim/simcluster/run_report.h"

namespace greyhound::itest {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory under /tmp (removed by the caller).
inline std::string make_temp_dir(const char* prefix) {
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return {};
  return tmpl;
}

// Removes a test's temporary directory, unless GREYHOUND_KEEP_TEST_DIRS is set (then it says where it is,
// for reading a failing run's logs and events).
inline void remove_temp_dir(const std::string& dir) {
  if (dir.empty()) return;
  const char* keep = std::getenv("GREYHOUND_KEEP_TEST_DIRS");
  if (keep != nullptr && *keep != '\0' && std::string(keep) != "0") {
    std::fprintf(stderr, "[ kept ] %s\n", dir.c_str());
    return;
  }
  std::system(("rm -rf " + dir).c_str());
}

struct SimRun {
  int exit_code = -1;
  nlohmann::json report;
  std::string dir;
  std::string log() const { return slurp(dir + "/simcluster.log"); }
  std::vector<sim::IterationLine> rank_iterations(int r) const {
    return sim::parse_iteration_log(slurp(dir + "/rank" + std::to_string(r) + ".out"));
  }
  std::vector<nlohmann::json> events(const std::string& type) const {
    std::vector<nlohmann::json> out;
    for (const auto& e : report["events"]) {
      if (e.value("type", "") == type) out.push_back(e);
    }
    return out;
  }
  // The localisations of windows that measured iterations (iter_ms) at a steady pace (pace_spread at most
  // daemon/localiser.h's kSteadyPaceSpread). A window a fault began in shows two states of the job at once:
  // the master reports what it read there but opens nothing from it (unless the window before was unsteady
  // too), and the next window decides.
  std::vector<nlohmann::json> steady_localisations() const {
    std::vector<nlohmann::json> out;
    for (const auto& e : events("localised")) {
      const nlohmann::json& d = e["detail"];
      if (d.value("iter_ms", 0.0) > 0 && d.value("pace_spread", 1.0) <= master::kSteadyPaceSpread) out.push_back(e);
    }
    return out;
  }
  // The master's decisions in job time, one per line (localisations, fail-slows, plans, remedy checks), for
  // a failing test to say what happened without the whole event log.
  std::string decisions() const {
    std::ostringstream out;
    out << "the master's decisions (job s):\n";
    if (!report.is_object() || !report.contains("events")) return "no report";
    for (const auto& e : report["events"]) {
      const std::string type = e.value("type", "");
      const nlohmann::json& d = e.contains("detail") ? e["detail"] : nlohmann::json::object();
      std::string what;
      if (type == "localised") {
        what = d.value("cause", "") + " culprit " + std::to_string(d.value("culprit", -1)) + " links " +
               d.value("suspect_links", nlohmann::json::array()).dump();
      } else if (type == "fail_slow_open" || type == "fail_slow_end") {
        what = "id " + std::to_string(d.value("id", -1)) + " " + d.value("cause", "") + " " + d.value("reason", "");
      } else if (type == "plan") {
        what = "epoch " + std::to_string(d.value("epoch", -1)) + " " + d.value("strategy", "") + " " +
               d.value("action", "") + " " + d.value("microbatches", nlohmann::json::array()).dump() + ": " +
               d.value("reason", "");
      } else if (type == "plan_applied" || type == "plan_rejected" || type == "plan_timeout") {
        what = "epoch " + std::to_string(d.value("epoch", -1)) + " " + e.value("source", "");
      } else if (type == "remedy_check") {
        what = "epoch " + std::to_string(d.value("epoch", -1)) + " " + d.value("reason", "");
      } else {
        continue;
      }
      out << e.value("t_s", 0.0) << " " << type << " " << what << "\n";
    }
    return out.str();
  }
  // Empty, or where the job itself ran slower in (from_s, to_s] by what the detector is built to report:
  // rank 0 ran 6 consecutive iterations (min_run) each >= 8 % above the span's median (the 10 % validation,
  // less jitter).
  std::string job_slowed_in(double from_s, double to_s) const {
    std::vector<double> ms, end;
    for (const auto& it : rank_iterations(0)) {
      if (it.t_s > from_s && it.t_s <= to_s) {
        ms.push_back(it.iter_ms);
        end.push_back(it.t_s);
      }
    }
    if (ms.size() < 6) return {};
    std::vector<double> sorted = ms;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
    const double median = sorted[sorted.size() / 2];
    int run = 0;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      run = ms[i] >= 1.08 * median ? run + 1 : 0;
      if (run == 6) {
        return "iterations ending " + std::to_string(end[i - 5]) + " .. " + std::to_string(end[i]) + " s at >= 1.08 x " +
               std::to_string(median) + " ms";
      }
    }
    return {};
  }
  // Iterations of rank 0 that began at or after from_s and ended by to_s (an iteration in progress at
  // from_s is not counted).
  int iterations_within(double from_s, double to_s) const {
    int n = 0;
    for (const auto& it : rank_iterations(0)) n += it.t_s - it.iter_ms * 1e-3 >= from_s && it.t_s <= to_s;
    return n;
  }
};

// The premise of the end-to-end tests is that only the injected faults slow the job. On a shared machine,
// contention beyond what the modeled clock absorbs can itself slow the simulated job, and greyhound then
// rightly reports it. So `once` is run again (at most twice) while the job was slower, in one of
// `quiet_spans` (job time, outside the faults), by what the detector is built to report (job_slowed_in);
// the third run counts whatever happened. Shorter or smaller disturbances never cause a repeat.
template <typename Once>
SimRun run_on_a_quiet_machine(Once once, const std::vector<std::pair<double, double>>& quiet_spans,
                              const std::string& what) {
  SimRun r;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    r = once();
    std::string busy;
    for (const auto& [from, to] : quiet_spans) {
      if (busy.empty()) busy = r.job_slowed_in(from, to);
    }
    if (busy.empty() || attempt == 3) break;
    std::cerr << "[ note ] run " << attempt << " of " << what << ": the machine slowed the job (" << busy
              << "); repeating it\n";
  }
  return r;
}

// Empty, or what says that an event Redis acknowledged was lost: every stream id the masters consumed
// (master-events.jsonl, across their restarts) must still be in the run's final stream, and no agent may
// have dropped an event (agent_stop). `consumed` counts the ids checked.
inline std::string acknowledged_events_lost(const SimRun& r, int* consumed = nullptr) {
  std::vector<std::string> final_ids;
  for (const auto& e : r.report["events"]) final_ids.push_back(e.value("id", ""));
  std::sort(final_ids.begin(), final_ids.end());
  std::istringstream log(slurp(r.dir + "/master-events.jsonl"));
  std::string line, lost;
  int checked = 0;
  while (std::getline(log, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) {
      lost += "unreadable log line: " + line + "\n";
      continue;
    }
    if (!j.contains("id") || !j["id"].is_string()) continue;  // what the master emitted
    ++checked;
    if (!std::binary_search(final_ids.begin(), final_ids.end(), j["id"].get<std::string>())) lost += "lost: " + line + "\n";
  }
  for (const auto& e : r.report["events"]) {
    if (e.value("type", "") == "agent_stop" && e["detail"].value("events_dropped", 0) != 0) lost += "dropped: " + e.dump() + "\n";
  }
  if (consumed != nullptr) *consumed = checked;
  return lost;
}

// Runs a greyhound-simcluster command line whose report goes to r.dir/report.json, and reads it back.
inline SimRun run_command(SimRun r, const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(r.dir + "/report.json");
  if (in) {
    try {
      in >> r.report;
    } catch (const nlohmann::json::exception&) {
      r.report = nullptr;
    }
  }
  return r;
}

// Runs the 8-rank cluster as job `name` in root/name with `args` (faults, duration, flags) appended.
inline SimRun run_simcluster(const std::string& root, const std::string& name, const std::string& args,
                             int microbatches = 4, int gpus_per_node = 4) {
  SimRun r;
  r.dir = root + "/" + name;
  std::system(("mkdir -p " + r.dir).c_str());
  const std::string cmd = std::string(GREYHOUND_SIMCLUSTER) +
                          " --tp 2 --dp 2 --pp 2 --gpus-per-node " + std::to_string(gpus_per_node) +
                          " --microbatches " + std::to_string(microbatches) +
                          " --quiet --job " + name + " --work-dir " + r.dir + " --report " + r.dir + "/report.json " +
                          args + " > " + r.dir + "/simcluster.log 2>&1";
  return run_command(std::move(r), cmd);
}

// Two runs at once (b on a thread of its own): a test that holds a run with greyhound against one without
// runs both side by side, so that whatever else loads the machine falls on both alike.
template <typename A, typename B>
auto at_once(A a, B b) {
  auto later = std::async(std::launch::async, std::move(b));
  auto first = a();
  return std::make_pair(std::move(first), later.get());
}

// A timing model (sim/sim_model.h's fields) in which no modelled kernel, collective or transfer takes time:
// the ranks run as fast as their CPU work goes (80 iterations of 8 ranks in about 4 s instead of 35). For
// references whose results do not depend on timing (losses, weight checksums: the same bit for bit, the
// stand-ins compute the same numbers whatever their durations). Quoted for the shell.
inline constexpr const char* kInstantModel =
    R"('{"intra_bw_MBps":1e9,"inter_bw_MBps":1e9,"intra_lat_us":0,"inter_lat_us":0,"gemm_gflops":1e6,)"
    R"("mem_bw_MBps":1e9,"launch_us":0}')";

// The newest modification time (ns) of the programs and libraries a simulated run uses (the build tree's
// bin/ and lib/): a cached reference is made again after any of them was rebuilt.
inline std::int64_t newest_build_mtime_ns() {
  namespace fs = std::filesystem;
  std::int64_t newest = 0;
  const fs::path bin = fs::path(GREYHOUND_SIMCLUSTER).parent_path();
  for (const fs::path& dir : {bin, bin.parent_path() / "lib"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      struct stat st {};
      if (::stat(e.path().c_str(), &st) == 0) {
        newest = std::max<std::int64_t>(newest, st.st_mtim.tv_sec * 1'000'000'000ll + st.st_mtim.tv_nsec);
      }
    }
  }
  return newest;
}

// A reference run without greyhound on the instant model, made once for the whole suite: the first test
// process that needs it runs it (under a lock on its key), every later one reads it back. `args` is the
// whole of the run's command line but its files (the shape, the length, the seed: no file outside the key,
// a fault file say, whose contents would not be part of it). Keyed by `args` and by the build
// (newest_build_mtime_ns); kept in GREYHOUND_TEST_CACHE_DIR (the build tree), where a rebuild's first
// reference removes those of earlier builds. Read-only to the tests.
inline SimRun reference_run(const std::string& args) {
  namespace fs = std::filesystem;
  const std::string all = args + " --no-greyhound --model " + kInstantModel;
  const std::string build = std::to_string(newest_build_mtime_ns());
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a64(all)));  // one key in every process
  const fs::path cache = GREYHOUND_TEST_CACHE_DIR;
  std::error_code ec;
  fs::create_directories(cache, ec);
  SimRun r;
  r.dir = (cache / (std::string(hash) + "-" + build)).string();
  const int lock = ::open((r.dir + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);  // released when closed
  if (std::ifstream(r.dir + "/done").good()) {
    r = run_command(std::move(r), "true");  // reads the report back
    r.exit_code = 0;
  } else {
    for (const auto& e : fs::directory_iterator(cache, ec)) {  // earlier builds' references and locks
      if (e.path().filename().string().find("-" + build) == std::string::npos) fs::remove_all(e.path(), ec);
    }
    fs::remove_all(r.dir, ec);
    fs::create_directories(r.dir, ec);
    const std::string cmd = std::string(GREYHOUND_SIMCLUSTER) + " " + all + " --quiet --job reference --work-dir " +
                            r.dir + " --report " + r.dir + "/report.json > " + r.dir + "/simcluster.log 2>&1";
    r = run_command(std::move(r), cmd);  // cmd first: the order in which arguments are evaluated is unspecified
    if (r.exit_code == 0) std::ofstream(r.dir + "/done") << all << "\n";
  }
  if (lock >= 0) ::close(lock);
  return r;
}

}  // namespace greyhound::itest
