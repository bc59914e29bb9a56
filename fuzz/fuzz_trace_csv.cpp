// The recorded-data files of greyhoundctl period / detect (cli/trace_csv.h) on any text, and what they read
// fed to the analysis as the command does: the period detector and the three slowdown detectors never crash
// and name only iterations that exist, with finite figures. The first byte chooses the file.
#include <cmath>

#include "cli/trace_csv.h"
#include "fuzz/fuzz_check.h"
#include "greyhound/analysis/period_detector.h"
#include "greyhound/hash.h"
#include "greyhound/analysis/slowdown_detector.h"

namespace {

namespace ga = greyhound::analysis;
using greyhound::fuzz::check;

// True when the text was read; a refusal names its row and quotes only a part of what it read.
template <class Rows>
bool was_read(const greyhound::Result<Rows>& rows) {
  if (rows) return true;
  check(rows.error().rfind("row ", 0) == 0, "an error names its row");
  check(rows.error().size() < 400, "an error quotes only a part of what it read");
  return false;
}

void ops(std::string_view text) {
  const auto rows = greyhound::ctl::read_op_trace(text);
  if (!was_read(rows)) return;
  ga::PeriodDetector detector(ga::PeriodParams{});
  std::vector<ga::Iteration> iterations;
  for (const auto& row : *rows) {
    detector.push(row.t_ns, ga::op_symbol(greyhound::fnv1a64(row.op), greyhound::fnv1a64(row.group), row.bytes), iterations);
  }
  detector.finish(iterations);
  for (const auto& it : iterations) check(it.end_t_ns <= rows->back().t_ns, "an iteration ends within the trace");
}

void iterations(std::string_view text) {
  const auto rows = greyhound::ctl::read_iteration_trace(text);
  if (!was_read(rows)) return;
  for (const char* name : {"bocd+v", "bocd", "window"}) {
    auto detector = ga::make_slowdown_detector(*ga::method_from_name(name));
    std::vector<ga::SlowdownEvent> events;
    for (std::size_t i = 0; i < rows->size(); ++i) {
      events.clear();
      detector->push((*rows)[i].iter_ms, events);
      for (const auto& e : events) {
        check(e.index <= i, "an event names an iteration read");
        check(e.detected_index >= e.index && e.detected_index <= i,
              "an event is decided after it began, at the latest now");
        check(std::isfinite(e.before_ms) && std::isfinite(e.after_ms) && std::isfinite(e.ratio),
              "an event's figures are finite");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    ops(text);
  } else {
    iterations(text);
  }
  return 0;
}
