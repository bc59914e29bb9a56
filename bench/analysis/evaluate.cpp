// greyhound-eval-detect: accuracy of the three slowdown detectors on labelled traces, side by side with the
// paper's Tables 3/4, and their detection latency. Prints Markdown (docs/analysis.md quotes it).
//   greyhound-eval-detect [--scale N] [--seed S] [--ablation]
// --scale multiplies the paper's population sizes (default 2: 1,052 traces + 200 sim40 traces);
// --ablation adds the trade-off tables behind the chosen parameters (min_run and the early rule, validation
// mean, hazard).
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "common/args.h"
#include "evaluation.h"
#include "greyhound/analysis/bocd_detector.h"
#include "greyhound/analysis/sliding_window_detector.h"
#include "trace_generator.h"

namespace ga = greyhound::analysis;
namespace ge = greyhound::analysis::eval;

namespace {

struct PaperRow {
  const char* accuracy;
  const char* fpr;
  const char* fnr;
};

PaperRow paper(ge::Population p, ga::DetectionMethod m) {
  using ga::DetectionMethod;
  if (p == ge::Population::kComputation) {
    switch (m) {
      case DetectionMethod::kSlidingWindow: return {"99.5 %", "0.0 %", "25.0 %"};
      case DetectionMethod::kBocd: return {"77.8 %", "18.39 %", "0.0 %"};
      case DetectionMethod::kBocdValidated: return {"100.0 %", "0.0 %", "0.0 %"};
    }
  }
  if (p == ge::Population::kCommunication) {
    switch (m) {
      case DetectionMethod::kSlidingWindow: return {"93.5 %", "1.5 %", "12.2 %"};
      case DetectionMethod::kBocd: return {"69.2 %", "34.0 %", "0.0 %"};
      case DetectionMethod::kBocdValidated: return {"99.1 %", "0.0 %", "2.3 %"};
    }
  }
  return {"-", "-", "-"};
}

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f %%", 100.0 * v);
  return b;
}

std::string num(double v) {
  if (std::isnan(v)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", v);
  return b;
}

std::string frac(std::uint64_t a, std::uint64_t b) { return std::to_string(a) + "/" + std::to_string(b); }

void print_accuracy_header() {
  std::printf("| population | method | traces (fail-slow) | accuracy | FPR | FNR | positives with an extra event | paper accuracy | paper FPR | paper FNR |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
}

void print_accuracy_row(const char* pop, const char* method, const ge::Score& s, PaperRow p) {
  std::printf("| %s | %s | %llu (%llu) | %s | %s | %s | %llu | %s | %s | %s |\n", pop, method,
              static_cast<unsigned long long>(s.traces), static_cast<unsigned long long>(s.positives),
              pct(s.accuracy()).c_str(), pct(s.fpr()).c_str(), pct(s.fnr()).c_str(),
              static_cast<unsigned long long>(s.positives_with_extra), p.accuracy, p.fpr, p.fnr);
}

void print_latency_header() {
  std::printf("| population | method | slowdowns found | median | p95 | within 5 | max | slowdowns >= 20 %% found | median | p95 | recoveries found | median | p95 | unmatched events / 10k iterations |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

std::string share_within(const std::vector<double>& v, double limit) {
  if (v.empty()) return "-";
  std::size_t n = 0;
  for (double x : v) n += x <= limit ? 1 : 0;
  return pct(double(n) / double(v.size()));
}

void print_latency_row(const char* pop, const char* method, const ge::Score& s) {
  std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f |\n", pop, method,
              frac(s.found_slowdowns, s.true_slowdowns).c_str(), num(ge::quantile(s.slowdown_latency, 0.5)).c_str(),
              num(ge::quantile(s.slowdown_latency, 0.95)).c_str(), share_within(s.slowdown_latency, 5.0).c_str(),
              num(ge::quantile(s.slowdown_latency, 1.0)).c_str(),
              frac(s.slowdown_latency_ge20.size(), s.true_slowdowns_ge20).c_str(),
              num(ge::quantile(s.slowdown_latency_ge20, 0.5)).c_str(),
              num(ge::quantile(s.slowdown_latency_ge20, 0.95)).c_str(),
              frac(s.found_recoveries, s.true_recoveries).c_str(), num(ge::quantile(s.recovery_latency, 0.5)).c_str(),
              num(ge::quantile(s.recovery_latency, 0.95)).c_str(),
              s.iterations ? 1e4 * double(s.unmatched_events) / double(s.iterations) : 0.0);
}

void print_ablation_row(const std::string& label, const ge::Score& s) {
  std::printf("| %s | %s | %s | %s | %llu | %s | %s | %s | %.2f |\n", label.c_str(), pct(s.accuracy()).c_str(),
              pct(s.fpr()).c_str(), pct(s.fnr()).c_str(), static_cast<unsigned long long>(s.positives_with_extra),
              num(ge::quantile(s.slowdown_latency_ge20, 0.5)).c_str(),
              num(ge::quantile(s.slowdown_latency_ge20, 0.95)).c_str(),
              num(ge::quantile(s.recovery_latency, 0.5)).c_str(),
              s.iterations ? 1e4 * double(s.unmatched_events) / double(s.iterations) : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const greyhound::Args args(std::vector<std::string>(argv + 1, argv + argc), {"scale", "seed"}, {"ablation"});
    const auto scale = static_cast<std::uint32_t>(args.integer_in("scale", 2, 1, 100));
    const auto seed = static_cast<std::uint64_t>(args.integer_in("seed", 1, 0, 1LL << 40));

    const ge::Population pops[] = {ge::Population::kComputation, ge::Population::kCommunication,
                                   ge::Population::kLargeJob, ge::Population::kSim40};
    std::vector<std::vector<ge::LabelledTrace>> traces;
    for (auto p : pops) traces.push_back(ge::generate_population(ge::population_spec(p, scale), seed));
    const ga::DetectionMethod methods[] = {ga::DetectionMethod::kSlidingWindow, ga::DetectionMethod::kBocd,
                                           ga::DetectionMethod::kBocdValidated};

    std::vector<std::vector<ge::Score>> scores(std::size(pops));
    for (std::size_t i = 0; i < std::size(pops); ++i) {
      for (auto m : methods) scores[i].push_back(ge::evaluate(traces[i], [m] { return ga::make_slowdown_detector(m); }));
    }

    std::printf("## Detection accuracy per job (labelled traces: scale %u, seed %llu)\n\n", scale,
                static_cast<unsigned long long>(seed));
    print_accuracy_header();
    for (std::size_t i = 0; i < std::size(pops); ++i) {
      for (std::size_t k = 0; k < std::size(methods); ++k) {
        print_accuracy_row(std::string(ge::population_name(pops[i])).c_str(),
                           std::string(ga::method_name(methods[k])).c_str(), scores[i][k], paper(pops[i], methods[k]));
      }
    }
    // The paper's three populations together (sim40 is ours).
    for (std::size_t k = 0; k < std::size(methods); ++k) {
      ge::Score all;
      for (std::size_t i = 0; i < 3; ++i) all.merge(scores[i][k]);
      print_accuracy_row("all three", std::string(ga::method_name(methods[k])).c_str(), all, {"-", "-", "-"});
    }

    std::printf("\n## Detection latency (iterations from the true onset to detected_index)\n\n");
    print_latency_header();
    for (std::size_t i = 0; i < std::size(pops); ++i) {
      for (std::size_t k = 0; k < std::size(methods); ++k) {
        print_latency_row(std::string(ge::population_name(pops[i])).c_str(),
                          std::string(ga::method_name(methods[k])).c_str(), scores[i][k]);
      }
    }

    if (args.flag("ablation")) {
      std::vector<ge::LabelledTrace> paper_traces;
      for (std::size_t i = 0; i < 3; ++i) paper_traces.insert(paper_traces.end(), traces[i].begin(), traces[i].end());
      auto run_variant = [&](const std::string& label, const ga::BocdDetectorParams& p) {
        print_ablation_row(label, ge::evaluate(paper_traces, [p] { return std::make_unique<ga::BocdDetector>(p); }));
      };
      std::printf("\n## bocd+v trade-offs (the paper's three populations together)\n\n");
      std::printf("| variant | accuracy | FPR | FNR | positives with an extra event | median latency >= 20 %% | p95 | median recovery latency | unmatched / 10k it |\n");
      std::printf("|---|---|---|---|---|---|---|---|---|\n");
      for (std::uint32_t d = 2; d <= 6; ++d) {
        ga::BocdDetectorParams p;
        p.min_run = d;
        p.early_run = 0;
        p.severe_run = 0;
        run_variant("min_run " + std::to_string(d) + ", no early rule", p);
      }
      for (auto [e, sig] : {std::pair{5u, 2.5}, std::pair{4u, 2.5}, std::pair{5u, 2.0}, std::pair{5u, 3.0},
                            std::pair{5u, 4.0}}) {
        ga::BocdDetectorParams p;
        p.early_run = e;
        p.flat_sigmas = sig;
        p.severe_run = 0;
        char b[96];
        std::snprintf(b, sizeof b, "min_run 6, early_run %u if flat within %.1f sigma, no severe rule", e, sig);
        run_variant(b, p);
      }
      for (auto [run, ratio] : {std::pair{4u, 1.2}, std::pair{4u, 1.3}, std::pair{4u, 1.4}, std::pair{4u, 1.5},
                                std::pair{3u, 1.5}, std::pair{3u, 2.0}}) {
        ga::BocdDetectorParams p;
        p.severe_run = run;
        p.severe_ratio = ratio;
        p.moderate_ratio = 0;
        const ga::BocdDetectorParams d;
        char b[128];
        std::snprintf(b, sizeof b, "min_run 6, early_run 5, severe_run %u if flat and >= %.1fx, no moderate shifts%s", run,
                      ratio, run == d.severe_run && ratio == d.severe_ratio ? " (the previous default)" : "");
        run_variant(b, p);
      }
      for (auto [ratio, sig, floor] : {std::tuple{1.1, 0.5, 0.01}, std::tuple{1.15, 0.5, 0.01},
                                        std::tuple{1.2, 0.5, 0.01}, std::tuple{1.15, 0.75, 0.01},
                                        std::tuple{1.15, 1.0, 0.01}, std::tuple{1.15, 1.5, 0.01},
                                        std::tuple{1.15, 0.5, 0.02}}) {
        ga::BocdDetectorParams p;
        p.moderate_ratio = ratio;
        p.moderate_flat_sigmas = sig;
        p.moderate_flat_floor = floor;
        const ga::BocdDetectorParams d;
        char b[192];
        std::snprintf(b, sizeof b,
                      "min_run 6, early_run 5, severe_run 4 if flat and >= 1.4x, or if within %.2f sigma (%.0f %%) and "
                      ">= %.2fx%s",
                      sig, floor * 100, ratio,
                      ratio == d.moderate_ratio && sig == d.moderate_flat_sigmas && floor == d.moderate_flat_floor
                          ? " (default)"
                          : "");
        run_variant(b, p);
      }
      for (auto [lo, hi] : {std::pair{0.0, 0.0}, std::pair{0.25, 0.25}, std::pair{0.0, 0.5}}) {
        ga::BocdDetectorParams p;
        p.validation.trim_low = lo;
        p.validation.trim_high = hi;
        char b[64];
        std::snprintf(b, sizeof b, "validation trim low %.2f high %.2f", lo, hi);
        run_variant(b, p);
      }
      for (std::uint32_t w : {8u, 16u, 32u}) {
        ga::BocdDetectorParams p;
        p.max_run = w;
        run_variant("max_run " + std::to_string(w), p);
      }
      for (double lambda : {50.0, 100.0, 250.0, 1000.0}) {
        ga::BocdDetectorParams p;
        p.hazard_lambda = lambda;
        run_variant("hazard_lambda " + num(lambda), p);
      }
      for (double prune : {1e-4, 1e-3}) {
        ga::BocdDetectorParams p;
        p.prune_below = prune;
        char b[32];
        std::snprintf(b, sizeof b, "prune_below %.0e", prune);
        run_variant(b, p);
      }
      {
        ga::BocdDetectorParams p;
        p.outlier_probability = 0.0;
        run_variant("no outlier component (plain Normal-Gamma)", p);
      }
      for (double th : {0.5, 0.9, 0.95, 0.98}) {
        ga::BocdDetectorParams p;
        p.threshold = th;
        char b[32];
        std::snprintf(b, sizeof b, "threshold %.2f", th);
        run_variant(b, p);
      }
      std::printf("\n## window baseline trade-offs\n\n");
      std::printf("| variant | accuracy | FPR | FNR | positives with an extra event | median latency >= 20 %% | p95 | median recovery latency | unmatched / 10k it |\n");
      std::printf("|---|---|---|---|---|---|---|---|---|\n");
      for (std::uint32_t k : {5u, 7u, 9u, 11u, 13u}) {
        ga::SlidingWindowParams p;
        p.short_window = k;
        print_ablation_row("short_window " + std::to_string(k),
                           ge::evaluate(paper_traces, [p] { return std::make_unique<ga::SlidingWindowDetector>(p); }));
      }
    }
    return 0;
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-eval-detect: %s\n", e.what());
    return 2;
  }
}
