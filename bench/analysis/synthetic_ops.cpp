#include "synthetic_ops.h"

#include <algorithm>
#include <cmath>

#include "greyhound/analysis/period_detector.h"
#include "rng.h"

namespace greyhound::analysis::eval {
namespace {

// Op codes as greyhound::Op numbers them (include/greyhound/ops.h); only equality matters here.
constexpr std::uint64_t kAllReduce = 1;
constexpr std::uint64_t kSend = 10;
constexpr std::uint64_t kRecv = 11;
constexpr std::uint64_t kTpGroup = 0x7001;
constexpr std::uint64_t kPpGroup = 0x7002;
constexpr std::uint64_t kDpGroup = 0x7003;

}  // namespace

std::vector<std::uint64_t> megatron_pattern(std::uint32_t microbatches, std::uint32_t tp_per_microbatch,
                                            std::uint32_t dp_buckets) {
  std::vector<std::uint64_t> p;
  const std::uint64_t act = 4u << 20;
  for (std::uint32_t m = 0; m < microbatches; ++m) {
    p.push_back(op_symbol(kRecv, kPpGroup, act));
    for (std::uint32_t t = 0; t < tp_per_microbatch; ++t) p.push_back(op_symbol(kAllReduce, kTpGroup, 1u << 20));
    p.push_back(op_symbol(kSend, kPpGroup, act));
    p.push_back(op_symbol(kRecv, kPpGroup, act + 1));  // backward: gradient of the activation
    for (std::uint32_t t = 0; t < tp_per_microbatch; ++t) p.push_back(op_symbol(kAllReduce, kTpGroup, 1u << 20));
    p.push_back(op_symbol(kSend, kPpGroup, act + 1));
  }
  for (std::uint32_t b = 0; b < dp_buckets; ++b) p.push_back(op_symbol(kAllReduce, kDpGroup, (25u << 20) + b));
  return p;
}

OpStream make_op_stream(const OpStreamSpec& spec) {
  Rng rng(spec.seed);
  OpStream s;
  const double min_iter_ms = spec.iter_ms.empty() ? 1.0 : *std::min_element(spec.iter_ms.begin(), spec.iter_ms.end());
  auto emit = [&](std::uint64_t t_ns, std::uint64_t sym) {
    if (rng.chance(spec.drop_probability)) return;
    if (!s.t_ns.empty()) t_ns = std::max(t_ns, s.t_ns.back());  // a rank's clock never goes back
    s.t_ns.push_back(t_ns);
    s.symbols.push_back(sym);
  };
  // Integer nanoseconds throughout, so that noise-free streams give exact iteration times.
  std::uint64_t start_ns = 1'000'000'000;
  for (std::uint32_t w = 0; w < spec.warmup_records; ++w) {
    emit(start_ns, op_symbol(15 /* CommInitRank */, 0x100 + w, 0));
    start_ns += 1'000'000;
  }
  s.first_iteration_record = s.t_ns.size();
  for (std::size_t k = 0; k < spec.iter_ms.size(); ++k) {
    s.iteration_start_ns.push_back(start_ns);
    const auto& pat = (!spec.pattern_after.empty() && k >= spec.change_at) ? spec.pattern_after : spec.pattern;
    const auto step_ns = static_cast<std::int64_t>(0.8 * min_iter_ms * 1e6 / static_cast<double>(pat.size()));
    const bool extra = rng.chance(spec.extra_per_iteration);
    const std::size_t extra_at = extra ? rng.integer(0, pat.size() - 1) : pat.size();
    for (std::size_t j = 0; j < pat.size(); ++j) {
      const double jitter_ns = std::clamp(spec.op_jitter_ms * 1e6 * rng.normal(), -0.4 * double(step_ns), 0.4 * double(step_ns));
      const std::int64_t at = static_cast<std::int64_t>(start_ns) + step_ns * static_cast<std::int64_t>(j) + std::llround(jitter_ns);
      emit(static_cast<std::uint64_t>(at), pat[j]);
      if (j == extra_at) emit(static_cast<std::uint64_t>(at + step_ns / 2), op_symbol(kAllReduce, 0x9999, 8));
    }
    start_ns += static_cast<std::uint64_t>(std::llround(spec.iter_ms[k] * 1e6));
  }
  s.iteration_start_ns.push_back(start_ns);
  return s;
}

}  // namespace greyhound::analysis::eval
