// The simulated cluster's input files on any text, the first byte choosing the reader: the fault file
// (sim/fault_schedule.h, simcluster/time_scale.h), the chaos schedule (sim/chaos_schedule.h) and the
// model (sim/sim_model.h). They refuse with their own error, never crash or abort, and what they accept
// is usable: finite slowdowns >= 1, link factors in (0, 1], chaos targets on the cluster's nodes, in time
// order; a fault schedule writes back what it reads.
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "fuzz/fuzz_check.h"
#include "sim/chaos_schedule.h"
#include "sim/fault_schedule.h"
#include "sim/sim_model.h"
#include "sim/simcluster/time_scale.h"

namespace {

namespace gs = greyhound::sim;
using greyhound::fuzz::check;

void faults(const std::string& text) {
  gs::FaultFile file;
  try {
    file = gs::parse_fault_file(text);
  } catch (const gs::FaultScheduleError&) {
    return;
  }
  if (file.time_scale) check(gs::time_scale_error(*file.time_scale).empty(), "a time scale read is usable");
  const gs::FaultSchedule& s = file.faults;
  (void)s.shape_error(8, 4);
  for (const auto& f : s.faults()) {
    for (double t : {f.start_s, (f.start_s + f.end_s) / 2, f.end_s}) {
      for (int r : {f.rank, 0}) {
        const double g = s.gpu_slowdown(r, t), c = s.cpu_slowdown(r, t);
        check(std::isfinite(g) && g >= 1 && std::isfinite(c) && c >= 1, "slowdowns are finite and >= 1");
        (void)s.killed(r, t);
        (void)s.hung_until(r, t);
      }
      const double l = s.link_factor(f.nodes[0], f.nodes[1], t);
      check(l > 0 && l <= 1, "a link keeps a factor in (0, 1]");
    }
  }
  const std::string once = s.to_json().dump();
  gs::FaultSchedule again;
  try {
    again = gs::FaultSchedule::parse_text(once);
  } catch (const gs::FaultScheduleError& e) {
    check(false, std::string("a schedule reads back what it writes: ") + e.what());
  }
  check(again.to_json().dump() == once, "and unchanged");
}

void chaos(const std::string& text) {
  for (int nodes : {1, 4}) {
    std::vector<gs::ChaosAction> actions;
    try {
      actions = gs::parse_chaos_text(text, nodes);
    } catch (const std::invalid_argument&) {
      continue;
    }
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const auto& a = actions[i];
      check(a.at_s >= 0 && (i == 0 || actions[i - 1].at_s <= a.at_s), "actions in time order from 0");
      check(a.action == "kill" || a.action == "start" || a.action == "stop" || a.action == "cont",
            "an action is kill, start, stop or cont");
      check(a.target != "redis" || a.action == "kill" || a.action == "start", "Redis is killed or started only");
      check(a.target != "leader" || a.action == "kill", "the leader is only killed");
      check(a.target == "redis" || a.target == "master" || a.target == "leader" || (a.node >= 0 && a.node < nodes),
            "an agent target is a node of the cluster");
    }
  }
}

void model(const std::string& text) {
  auto j = greyhound::parse_bounded(text);
  if (!j) return;
  try {
    (void)gs::SimModel::parse(*j);
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text = greyhound::fuzz::text_of(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: faults(text); break;
    case 1: chaos(text); break;
    default: model(text); break;
  }
  return 0;
}
