// greyhoundctl period / detect: the LocalAnalyzer's algorithms (src/analysis) on recorded data.
//
//   greyhoundctl period --ops FILE.csv [--min-acf 0.95]
//     FILE.csv: header t_ns,op,group,bytes; one NCCL call per row (t_ns a non-negative integer, op and group
//     any non-empty token, e.g. "AllReduce" and a group id, bytes a non-negative integer).
//     Prints {"period":P,"start":I,"iterations":[{"index":k,"t_s":..,"iter_ms":..},...],"segments":[...]}:
//     P and I (the row index, 0-based over data rows, where cycle 0 starts) of the last lock, every iteration
//     (t_s: when it ended), and one {"period","first_index"} per lock (several after a change of
//     period). Exit 1 when no period is found.
//   greyhoundctl detect --trace FILE.csv [--method bocd+v|bocd|window]
//     FILE.csv: header t_s,iter_ms; one row per iteration. Reads it strictly in order through the online
//     detector and prints one JSON object per event as it is decided:
//     {"event":"slowdown"|"recovery","index":i,"detected_index":j,"t_s":..,"before_ms":..,"after_ms":..,"ratio":..}
//     (index: first iteration at the new level; detected_index: the row after which it was decided; t_s: of
//     row `index`).
// Bad input (missing header, wrong column count, non-numeric cell, negative or decreasing time, empty file)
// is reported as one line naming the file, row (1-based line number) and column, and exits 2.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "cli/trace_csv.h"
#include "common/args.h"
#include "common/text.h"
#include "greyhound/analysis/period_detector.h"
#include "greyhound/hash.h"
#include "greyhound/analysis/slowdown_detector.h"

namespace greyhound::ctl {

namespace {

namespace ga = greyhound::analysis;

template <class T>
T rows_or_throw(const std::string& path, Result<T> rows) {
  if (!rows) throw ArgError(path + ": " + rows.error());
  return std::move(rows).value();
}


}  // namespace

int cmd_period(const Argv& argv) {
  const Args args(argv, {"ops", "min-acf"}, {});
  const std::string path = args.str("ops");
  ga::PeriodParams params;
  params.min_acf = args.number("min-acf", params.min_acf);
  if (!(params.min_acf > 0.0 && params.min_acf <= 1.0)) throw ArgError("--min-acf must be in (0, 1]");

  const std::string text = read_file(path);
  const auto rows = rows_or_throw(path, read_op_trace(text));
  ga::PeriodDetector detector(params);
  std::vector<ga::Iteration> iterations;
  for (const OpRow& row : rows) {
    detector.push(row.t_ns, ga::op_symbol(fnv1a64(row.op), fnv1a64(row.group), row.bytes), iterations);
  }
  detector.finish(iterations);  // the file is all there is: accept a lock still awaiting confirmation
  if (detector.locks() == 0) {
    std::fprintf(stderr, "greyhoundctl period: %s: no period with autocorrelation >= %g in %llu records\n",
                 path.c_str(), params.min_acf, static_cast<unsigned long long>(detector.records()));
    return 1;
  }

  nlohmann::ordered_json out;
  out["period"] = detector.period();
  out["start"] = detector.cycle_start();
  auto& its = out["iterations"] = nlohmann::ordered_json::array();
  auto& segments = out["segments"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    const auto& it = iterations[i];
    its.push_back({{"index", it.index}, {"t_s", static_cast<double>(it.end_t_ns) / 1e9}, {"iter_ms", it.iter_ns / 1e6}});
    if (i == 0 || it.segment != iterations[i - 1].segment) {
      segments.push_back({{"period", it.period}, {"first_index", it.index}});
    }
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int cmd_detect(const Argv& argv) {
  const Args args(argv, {"trace", "method"}, {});
  const std::string path = args.str("trace");
  const std::string method_text = args.str("method", "bocd+v");
  const auto method = ga::method_from_name(method_text);
  if (!method) throw ArgError("--method: '" + method_text + "' is not one of bocd+v, bocd, window");

  const auto rows = rows_or_throw(path, read_iteration_trace(read_file(path)));
  auto detector = ga::make_slowdown_detector(*method);
  std::vector<ga::SlowdownEvent> events;
  for (const IterationRow& row : rows) {
    events.clear();
    detector->push(row.iter_ms, events);
    for (const auto& e : events) {
      nlohmann::ordered_json j;
      j["event"] = std::string(ga::direction_name(e.direction));
      j["index"] = e.index;
      j["detected_index"] = e.detected_index;
      j["t_s"] = rows[e.index].t_s;
      j["before_ms"] = e.before_ms;
      j["after_ms"] = e.after_ms;
      j["ratio"] = e.ratio;
      std::printf("%s\n", j.dump().c_str());
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace greyhound::ctl
