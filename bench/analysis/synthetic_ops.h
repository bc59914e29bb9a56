// Synthetic NCCL op streams of one rank for testing and benchmarking PeriodDetector (a fixture, not part of
// the product): a per-iteration pattern of symbols, iteration durations, and optional noise (per-op
// jitter, extra ops, dropped records, a warm-up prefix, a change of pattern).
//
// Timing model: iteration k starts at S_k (S_0 = warm-up end) and lasts iter_ms[k]; op j of the pattern is
// issued at S_k + offset_j, offsets spread over the first 80 % of the shortest iteration, so consecutive
// iterations never interleave and the exact iteration time is S_{k+1} - S_k whatever j is used as anchor.
// Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <vector>

namespace greyhound::analysis::eval {

// A Megatron-like 1F1B pattern on one pipeline rank: per micro-batch a forward Recv/Send and a backward
// Recv/Send on the PP communicator with `tp_per_microbatch` tensor-parallel AllReduces in between, then
// `dp_buckets` gradient AllReduces (distinct sizes) on the DP communicator. Symbols via op_symbol().
std::vector<std::uint64_t> megatron_pattern(std::uint32_t microbatches, std::uint32_t tp_per_microbatch,
                                            std::uint32_t dp_buckets);

struct OpStreamSpec {
  std::vector<std::uint64_t> pattern;        // symbols of one iteration
  std::vector<std::uint64_t> pattern_after;  // pattern from iteration change_at on (empty: none)
  std::uint64_t change_at = 0;
  std::vector<double> iter_ms;               // duration of each iteration; its size is the iteration count
  double op_jitter_ms = 0.0;                 // Gaussian jitter of each op's time (clamped to keep order)
  double extra_per_iteration = 0.0;          // probability of one extra op (an unknown symbol) in an iteration
  double drop_probability = 0.0;             // probability that a record is lost
  std::uint32_t warmup_records = 0;          // records of distinct symbols before iteration 0
  std::uint64_t seed = 1;
};

struct OpStream {
  std::vector<std::uint64_t> t_ns;
  std::vector<std::uint64_t> symbols;
  std::vector<std::uint64_t> iteration_start_ns;  // S_0 .. S_n (the truth)
  std::uint64_t first_iteration_record = 0;       // index of iteration 0's first record (after warm-up)
};

OpStream make_op_stream(const OpStreamSpec& spec);

}  // namespace greyhound::analysis::eval
