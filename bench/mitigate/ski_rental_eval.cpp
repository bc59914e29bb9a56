// bench_ski_rental: total time lost to fail-slows under four policies, on generated incident sequences
// shaped like the paper's populations (GREYHOUND, ATC '25, characterisation table):
//   computation   1-node probes, 4 GPUs (DP 4):           ~10 min,  mean slowdown 11.79 %
//   communication 4-node probes, 8 GPUs (TP2 DP2 PP2):    ~24 min (sub-minute to 100+), 15.45 %
//   large jobs    512 GPUs (TP8 DP16 PP4), congestion 13/16, congestion + slow GPU 3/16: ~72 min, 34.59 %
//                 (20 % of them above 50 %)
//   mix           incidents drawn from the three in the paper's proportions of fail-slow jobs (6 : 43 : 16)
// Durations and severities are lognormal with those means; severities under the 10 % detection threshold
// are redrawn (greyhound never sees them). Each incident's outcomes come from the real code: the slow
// iteration time from CostModel with the injected fault, S2 from MicrobatchSolver + CostModel, S3 from
// TopologyPlanner, all relative to the healthy iteration time of the same model.
//
// Policies: always-S1 (never act), immediate-S4 (restart at detection), ski-rental (SkiRental driven once
// per iteration, as the master does), and the offline oracle (knows each duration and outcome: the best
// single strategy applied at detection). All act 3 iterations after onset and learn of the end 3
// iterations after it; detection and validation costs are common to all and left out. Lost time = wall
// time beyond what the same iterations take healthy, plus action overheads.
//
// Checks: ski-rental <= 2 x oracle on every sequence; on the mix, ski-rental below both fixed policies.
// --explain prints the incidents of each population's worst sequence.
// Usage: bench_ski_rental [--seed N] [--sequences N] [--incidents N] [--explain]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "greyhound/mitigate/cost_model.h"
#include "greyhound/mitigate/microbatch_solver.h"
#include "greyhound/mitigate/ski_rental.h"
#include "greyhound/mitigate/topology_planner.h"

namespace {

using namespace greyhound::mitigate;
using greyhound::Strategy;

constexpr double kGBps = 1e9;
constexpr int kDetectIterations = 3;
constexpr double kS2SolveS = 0.001;
constexpr double kS3PauseS = 60.0;
constexpr double kResidualHorizonS = 3600.0;  // a configuration left slower than healthy costs this long

// What one incident does to the job, by strategy (iteration times in seconds).
struct Incident {
  double healthy_s = 0.0;
  double slow_s = 0.0;
  double duration_s = 0.0;
  double severity = 0.0;
  FailSlowCause cause = FailSlowCause::kComputation;
  bool s2_ok = false;
  double s2_s = 0.0, s2_post_s = 0.0;
  bool s3_ok = false;
  double s3_s = 0.0, s3_post_s = 0.0;
  double s4_restart_s = 0.0;
};

double lognormal(std::mt19937_64& rng, double mean, double sigma) {
  const double mu = std::log(mean) - sigma * sigma / 2.0;
  return std::exp(std::normal_distribution<double>(mu, sigma)(rng));
}

// Smallest factor f in [lo, hi] (bisection, monotone) with f(x) reaching `target`.
double solve_monotone(const std::function<double(double)>& f, double target, double lo, double hi, bool increasing) {
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2.0;
    if ((f(mid) < target) == increasing) lo = mid; else hi = mid;
  }
  return (lo + hi) / 2.0;
}

struct JobTemplate {
  ClusterState cluster;
  JobShape job;
  std::int64_t pipeline_depth_for_s2 = 1;
};

CostModel model_of(const ClusterState& c, const JobShape& j) {
  auto m = CostModel::create(c, j);
  if (!m) {
    std::fprintf(stderr, "bench_ski_rental: %s\n", m.error().c_str());
    std::exit(1);
  }
  return std::move(m).value();
}

// S2 and S3 outcomes of a faulty cluster, the way the master would compute them.
void mitigations(const JobTemplate& t, const ClusterState& faulty, Incident& inc) {
  const CostModel healthy = model_of(t.cluster, t.job);
  const CostModel model = model_of(faulty, t.job);
  const Placement megatron = megatron_placement(t.job.dp, t.job.pp);
  inc.healthy_s = healthy.estimate(megatron).iteration_s;
  inc.slow_s = model.estimate(megatron).iteration_s;
  inc.severity = inc.slow_s / inc.healthy_s - 1.0;

  inc.s2_ok = false;
  if (inc.cause != FailSlowCause::kCommunication && t.job.dp > 1) {
    MicrobatchProblem pb;
    pb.time_per_microbatch_ms = model.replica_microbatch_s(megatron);
    for (auto& v : pb.time_per_microbatch_ms) v *= 1000.0;
    pb.current = t.job.microbatches;
    for (auto m : pb.current) pb.total_microbatches += m;
    pb.pipeline_depth = t.pipeline_depth_for_s2;
    MicrobatchSolver solver;
    const auto plan = solver.solve(pb);
    if (plan && plan->moved > 0) {
      inc.s2_s = model.estimate(megatron, plan->microbatches).iteration_s;
      inc.s2_post_s = healthy.estimate(megatron, plan->microbatches).iteration_s;
      inc.s2_ok = inc.s2_s < inc.slow_s;
    }
  }
  TopologyPlanOptions o;
  o.pause_s = kS3PauseS;
  o.horizon_s = 1e9;  // availability only: the controller decides when it pays
  const auto plan = TopologyPlanner(model).plan(megatron, o);
  inc.s3_ok = plan && plan->moved_slots > 0 && plan->predicted_iteration_s < inc.slow_s;
  if (inc.s3_ok) {
    inc.s3_s = plan->predicted_iteration_s;
    inc.s3_post_s = healthy.estimate(plan->placement).iteration_s;
  }
}

double draw_severity(std::mt19937_64& rng, double mean, double sigma) {
  for (;;) {
    const double s = lognormal(rng, mean, sigma);
    if (s >= 0.10 && s <= 3.0) return s;
  }
}

// --- populations -------------------------------------------------------------------------------------

JobTemplate probe_1node() {
  JobTemplate t;
  t.cluster = {1, 4, {}, 12.5 * kGBps, 400 * kGBps, {}};
  t.job = {1, 4, 1, {0.125}, 0.0, {1.0 * kGBps}, {8, 8, 8, 8}};
  return t;
}

JobTemplate probe_4node() {
  JobTemplate t;
  t.cluster = {4, 2, {}, 12.5 * kGBps, 200 * kGBps, {}};
  t.job = {2, 2, 2, {0.4, 0.4}, 0.05 * kGBps, {2.0 * kGBps, 2.0 * kGBps}, {4, 4}};
  return t;
}

JobTemplate large_512() {
  JobTemplate t;
  t.cluster = {64, 8, {}, 50 * kGBps, 400 * kGBps, {}};
  t.job = {8, 16, 4, {1.0, 1.0, 1.0, 1.0}, 0.1 * kGBps, {8 * kGBps, 8 * kGBps, 8 * kGBps, 8 * kGBps},
           std::vector<std::int64_t>(16, 8)};
  t.pipeline_depth_for_s2 = 4;
  return t;
}

// Node pairs that carry DP ring traffic in Megatron's placement (one slot per node).
std::vector<std::pair<int, int>> dp_ring_pairs(int dp, int pp) {
  std::vector<std::pair<int, int>> out;
  for (int s = 0; s < pp; ++s) {
    for (int r = 0; r < dp; ++r) {
      const int a = r + dp * s;
      const int b = (r + 1) % dp + dp * s;
      if (a < b || dp > 2) out.emplace_back(std::min(a, b), std::max(a, b));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Incident computation_incident(std::mt19937_64& rng) {
  static const JobTemplate t = probe_1node();
  Incident inc;
  inc.cause = FailSlowCause::kComputation;
  inc.duration_s = 60.0 * lognormal(rng, 10.0, 1.0);
  inc.s4_restart_s = 600.0;
  const double severity = draw_severity(rng, 0.1179, 0.5);
  const int gpu = std::uniform_int_distribution<int>(0, 3)(rng);
  const double healthy = model_of(t.cluster, t.job).estimate(megatron_placement(4, 1)).iteration_s;
  auto with = [&](double g) {
    ClusterState c = t.cluster;
    c.gpu_slowdown.assign(4, 1.0);
    c.gpu_slowdown[static_cast<std::size_t>(gpu)] = g;
    return c;
  };
  const double g = solve_monotone([&](double x) { return model_of(with(x), t.job).estimate(megatron_placement(4, 1)).iteration_s; },
                                  healthy * (1 + severity), 1.0, 10.0, true);
  mitigations(t, with(g), inc);
  return inc;
}

Incident communication_incident(std::mt19937_64& rng) {
  static const JobTemplate t = probe_4node();
  Incident inc;
  inc.cause = FailSlowCause::kCommunication;
  inc.duration_s = 60.0 * lognormal(rng, 24.0, 1.5);
  inc.s4_restart_s = 600.0;
  const double severity = draw_severity(rng, 0.1545, 0.5);
  const auto pairs = dp_ring_pairs(2, 2);
  const auto link = pairs[std::uniform_int_distribution<std::size_t>(0, pairs.size() - 1)(rng)];
  const double healthy = model_of(t.cluster, t.job).estimate(megatron_placement(2, 2)).iteration_s;
  auto with = [&](double f) {
    ClusterState c = t.cluster;
    c.links = {{link.first, link.second, f * c.inter_node_bytes_per_s}};
    return c;
  };
  const double f = solve_monotone([&](double x) { return model_of(with(x), t.job).estimate(megatron_placement(2, 2)).iteration_s; },
                                  healthy * (1 + severity), 1e-6, 1.0, false);
  mitigations(t, with(f), inc);
  return inc;
}

Incident large_incident(std::mt19937_64& rng) {
  static const JobTemplate t = large_512();
  Incident inc;
  const bool compound = std::uniform_int_distribution<int>(0, 15)(rng) < 3;
  inc.cause = compound ? FailSlowCause::kBoth : FailSlowCause::kCommunication;
  inc.duration_s = 60.0 * lognormal(rng, 72.0, 1.2);
  inc.s4_restart_s = 1800.0;
  const double severity = draw_severity(rng, 0.3459, 0.86);
  static const auto pairs = dp_ring_pairs(16, 4);
  std::vector<std::pair<int, int>> links;
  const int n_links = compound ? 1 : std::uniform_int_distribution<int>(1, 3)(rng);
  while (static_cast<int>(links.size()) < n_links) {
    const auto p = pairs[std::uniform_int_distribution<std::size_t>(0, pairs.size() - 1)(rng)];
    if (std::find(links.begin(), links.end(), p) == links.end()) links.push_back(p);
  }
  const int gpu = std::uniform_int_distribution<int>(0, 511)(rng);
  const double g = compound ? 1.0 + severity / 2.0 : 1.0;
  const Placement megatron = megatron_placement(16, 4);
  const double healthy = model_of(t.cluster, t.job).estimate(megatron).iteration_s;
  auto with = [&](double f) {
    ClusterState c = t.cluster;
    c.gpu_slowdown.assign(512, 1.0);
    c.gpu_slowdown[static_cast<std::size_t>(gpu)] = g;
    for (const auto& [a, b] : links) c.links.push_back({a, b, f * c.inter_node_bytes_per_s});
    return c;
  };
  const double f = solve_monotone([&](double x) { return model_of(with(x), t.job).estimate(megatron).iteration_s; },
                                  healthy * (1 + severity), 1e-6, 1.0, false);
  mitigations(t, with(f), inc);
  return inc;
}

// --- policies ----------------------------------------------------------------------------------------

enum class Policy { kAlwaysS1, kImmediateS4, kFixedS2, kFixedS3, kSkiRental };

struct Run {
  double lost_s = 0.0;
  Strategy peak = Strategy::kS1;
  bool reverted = false;
};

double time_in(const Incident& inc, Strategy s, bool fault) {
  switch (s) {
    case Strategy::kS1: return fault ? inc.slow_s : inc.healthy_s;
    case Strategy::kS2: return fault ? inc.s2_s : inc.s2_post_s;
    case Strategy::kS3: return fault ? inc.s3_s : inc.s3_post_s;
    case Strategy::kS4: return inc.healthy_s;
  }
  return inc.slow_s;
}

Run simulate(const Incident& inc, Policy policy, const SkiRentalConfig& cfg) {
  Run run;
  Strategy now_in = Strategy::kS1;
  double clock = 0.0;
  int fault_iterations = 0;
  int calm_iterations = 0;
  bool detected = false;
  std::optional<SkiRental> ski;
  auto pay = [&](double overhead) {
    run.lost_s += overhead;
    clock += overhead;
  };
  for (long it = 0; it < 10'000'000; ++it) {
    const bool fault = clock < inc.duration_s;
    const double t = time_in(inc, now_in, fault);
    clock += t;
    run.lost_s += t - inc.healthy_s;
    if (fault) ++fault_iterations; else ++calm_iterations;
    const bool present = calm_iterations < kDetectIterations;  // what the master knows
    if (!detected && fault_iterations >= kDetectIterations) {
      detected = true;
      Strategy fixed = Strategy::kS1;
      if (policy == Policy::kImmediateS4) fixed = Strategy::kS4;
      if (policy == Policy::kFixedS2) fixed = Strategy::kS2;
      if (policy == Policy::kFixedS3) fixed = Strategy::kS3;
      if (fixed != Strategy::kS1) {
        now_in = fixed;
        pay(fixed == Strategy::kS2 ? t + kS2SolveS
            : fixed == Strategy::kS3   ? cfg.s3_pause_s
                                               : inc.s4_restart_s);
        run.peak = fixed;
        continue;
      }
      if (policy == Policy::kSkiRental) {
        SkiRentalIncident si{inc.cause, inc.healthy_s, inc.s2_ok, inc.s3_ok, true};
        SkiRentalConfig c = cfg;
        c.s4_restart_s = inc.s4_restart_s;
        ski = std::move(SkiRental::create(c, si)).value();
      }
    }
    if (detected && ski && !ski->finished()) {
      const SkiRentalDecision d = ski->observe({t, present});
      if (d.action == SkiRentalAction::kApply) {
        now_in = d.strategy;
        run.peak = std::max(run.peak, d.strategy);
        pay(d.overhead_s);
      } else if (d.action == SkiRentalAction::kRevert) {
        now_in = Strategy::kS1;
        run.reverted = true;
        pay(d.overhead_s);
      }
    }
    if (detected && !present && (policy == Policy::kFixedS2 || policy == Policy::kFixedS3) &&
        now_in != Strategy::kS1 && time_in(inc, now_in, false) > inc.healthy_s * (1 + 1e-9)) {
      // The oracle's fixed strategies revert as soon as the end is known, when staying would cost.
      pay(now_in == Strategy::kS2 ? t + kS2SolveS : cfg.s3_pause_s);
      now_in = Strategy::kS1;
      run.reverted = true;
    }
    const bool settled = !ski || ski->finished();
    if (!fault && !present && settled) break;
    if (!fault && !detected) break;  // over before anyone noticed
  }
  const double residual = time_in(inc, now_in, false) / inc.healthy_s - 1.0;
  if (residual > 0.0) run.lost_s += residual * kResidualHorizonS;
  return run;
}

const char* cause_name(FailSlowCause c) {
  return c == FailSlowCause::kComputation ? "computation" : c == FailSlowCause::kCommunication ? "communication" : "both";
}

struct IncidentLine {
  Incident inc;
  double s1 = 0, s4 = 0, ski = 0, oracle = 0;
  Strategy peak = Strategy::kS1;
};

struct Totals {
  double s1 = 0, s4 = 0, ski = 0, oracle = 0;
  double worst_sequence_ratio = 0.0;
  double worst_incident_ratio = 0.0;
  double duration_s = 0, severity = 0;
  int incidents = 0, sequences = 0;
  int ski_s2 = 0, ski_s3 = 0, ski_s4 = 0, ski_reverts = 0;
  int over_2x_sequences = 0;
  std::vector<IncidentLine> worst_sequence;  // the incidents of the sequence with the worst ratio
};

void run_population(const std::function<Incident(std::mt19937_64&)>& draw, std::mt19937_64& rng,
                    int sequences, int per_sequence, const SkiRentalConfig& cfg, Totals& out) {
  for (int q = 0; q < sequences; ++q) {
    double s1 = 0, s4 = 0, ski = 0, oracle = 0;
    std::vector<IncidentLine> lines;
    for (int k = 0; k < per_sequence; ++k) {
      const Incident inc = draw(rng);
      const double a = simulate(inc, Policy::kAlwaysS1, cfg).lost_s;
      const double b = simulate(inc, Policy::kImmediateS4, cfg).lost_s;
      const Run r = simulate(inc, Policy::kSkiRental, cfg);
      double best = std::min(a, b);
      if (inc.s2_ok) best = std::min(best, simulate(inc, Policy::kFixedS2, cfg).lost_s);
      if (inc.s3_ok) best = std::min(best, simulate(inc, Policy::kFixedS3, cfg).lost_s);
      s1 += a;
      s4 += b;
      ski += r.lost_s;
      oracle += best;
      if (best > 0) out.worst_incident_ratio = std::max(out.worst_incident_ratio, r.lost_s / best);
      lines.push_back({inc, a, b, r.lost_s, best, r.peak});
      out.ski_s2 += r.peak == Strategy::kS2 ? 1 : 0;
      out.ski_s3 += r.peak == Strategy::kS3 ? 1 : 0;
      out.ski_s4 += r.peak == Strategy::kS4 ? 1 : 0;
      out.ski_reverts += r.reverted ? 1 : 0;
      out.duration_s += inc.duration_s;
      out.severity += inc.severity;
      ++out.incidents;
    }
    out.s1 += s1;
    out.s4 += s4;
    out.ski += ski;
    out.oracle += oracle;
    const double ratio = oracle > 0 ? ski / oracle : 1.0;
    if (ratio > out.worst_sequence_ratio) {
      out.worst_sequence_ratio = ratio;
      out.worst_sequence = std::move(lines);
    }
    if (ratio > 2.0) ++out.over_2x_sequences;
    ++out.sequences;
  }
}

void explain(const char* name, const Totals& t) {
  std::printf("worst %s sequence (ratio %.3f): duration, severity, cause, iteration healthy/slow/S2/S3 (s), "
              "lost s: always-S1, immediate-S4, ski-rental (highest strategy), oracle\n", name, t.worst_sequence_ratio);
  for (const auto& l : t.worst_sequence) {
    const Incident& i = l.inc;
    std::printf("  %7.1f min %5.1f%% %-13s %6.3f/%6.3f/%s/%s  %9.1f %9.1f %9.1f (%s) %9.1f\n", i.duration_s / 60.0,
                100.0 * i.severity, cause_name(i.cause), i.healthy_s, i.slow_s,
                i.s2_ok ? std::to_string(i.s2_s).substr(0, 6).c_str() : "-",
                i.s3_ok ? std::to_string(i.s3_s).substr(0, 6).c_str() : "-", l.s1, l.s4, l.ski,
                std::string(greyhound::name(l.peak)).c_str(), l.oracle);
  }
}

void print_row(const char* name, const Totals& t) {
  std::printf("%-14s %9d %8.1f %7.1f%% %10.2f %12.2f %10.2f %8.2f %9.3f %9.3f   %d/%d/%d/%d\n", name, t.incidents,
              t.duration_s / t.incidents / 60.0, 100.0 * t.severity / t.incidents, t.s1 / 3600.0, t.s4 / 3600.0,
              t.ski / 3600.0, t.oracle / 3600.0, t.worst_sequence_ratio, t.worst_incident_ratio, t.ski_s2, t.ski_s3,
              t.ski_s4, t.ski_reverts);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  int sequences = 100;
  int per_sequence = 10;
  bool explain_worst = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_ski_rental: %s needs a value\n", flag);
        std::exit(2);
      }
      return std::strtoll(argv[++i], nullptr, 10);
    };
    if (std::strcmp(argv[i], "--seed") == 0) seed = static_cast<std::uint64_t>(next("--seed"));
    else if (std::strcmp(argv[i], "--sequences") == 0) sequences = static_cast<int>(next("--sequences"));
    else if (std::strcmp(argv[i], "--incidents") == 0) per_sequence = static_cast<int>(next("--incidents"));
    else if (std::strcmp(argv[i], "--explain") == 0) explain_worst = true;
    else {
      std::fprintf(stderr, "usage: bench_ski_rental [--seed N] [--sequences N] [--incidents N] [--explain]\n");
      return 2;
    }
  }
  if (sequences < 1 || per_sequence < 1) {
    std::fprintf(stderr, "bench_ski_rental: --sequences and --incidents must be >= 1\n");
    return 2;
  }
  SkiRentalConfig cfg;
  cfg.s2_solve_s = kS2SolveS;
  cfg.s3_pause_s = kS3PauseS;

  std::printf("Ski-rental evaluation: %d sequences x %d incidents per population (seed %llu)\n", sequences,
              per_sequence, static_cast<unsigned long long>(seed));
  std::printf("overheads: S2 = one iteration + %.3f s, S3 = %.0f s pause, S4 = 600 s (probes) / 1800 s (large jobs)\n",
              kS2SolveS, kS3PauseS);
  std::printf("lost time in hours; ratios ski-rental / oracle; ski actions: incidents whose highest strategy was S2/S3/S4, and reverts\n");
  std::printf("%-14s %9s %8s %8s %10s %12s %10s %8s %9s %9s   %s\n", "population", "incidents", "dur(min)",
              "severity", "always-S1", "immediate-S4", "ski-rental", "oracle", "worst seq", "worst inc",
              "S2/S3/S4/revert");
  std::mt19937_64 rng(seed);
  Totals comp, comm, large, mix;
  run_population(computation_incident, rng, sequences, per_sequence, cfg, comp);
  print_row("computation", comp);
  run_population(communication_incident, rng, sequences, per_sequence, cfg, comm);
  print_row("communication", comm);
  run_population(large_incident, rng, sequences, per_sequence, cfg, large);
  print_row("large jobs", large);
  auto mixed = [](std::mt19937_64& r) {
    const int pick = std::uniform_int_distribution<int>(0, 64)(r);  // 6 : 43 : 16
    if (pick < 6) return computation_incident(r);
    if (pick < 49) return communication_incident(r);
    return large_incident(r);
  };
  run_population(mixed, rng, sequences, per_sequence, cfg, mix);
  print_row("mix", mix);

  if (explain_worst) {
    explain("computation", comp);
    explain("communication", comm);
    explain("large jobs", large);
    explain("mix", mix);
  }
  const double worst = std::max({comp.worst_sequence_ratio, comm.worst_sequence_ratio, large.worst_sequence_ratio,
                                 mix.worst_sequence_ratio});
  const int over = comp.over_2x_sequences + comm.over_2x_sequences + large.over_2x_sequences + mix.over_2x_sequences;
  std::printf("goal: ski-rental <= 2 x oracle on every sequence: worst %.3f, %d of %d sequences over -> %s\n", worst,
              over, 4 * sequences, over == 0 ? "met" : "MISSED");
  const bool beats = mix.ski < mix.s1 && mix.ski < mix.s4;
  std::printf("goal: ski-rental below always-S1 (%.2f h) and immediate-S4 (%.2f h) on the mix: %.2f h -> %s\n",
              mix.s1 / 3600.0, mix.s4 / 3600.0, mix.ski / 3600.0, beats ? "met" : "MISSED");
  return 0;
}
