#include "bench/scale/synthetic_job.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "greyhound/hash.h"

namespace greyhound::bench {
namespace {

constexpr double kCompute = 0.55, kTp = 0.25, kDp = 0.12, kPp = 0.08;  // shares of a healthy iteration
constexpr int kTpCalls = 64, kDpCalls = 4, kPpCallsPerMicrobatch = 2;
constexpr std::uint64_t kIterationsSeen = 100;  // the op counts published: this many iterations' worth

// A deterministic jitter in [-1, 1] for (rank, window, what).
double jitter(int rank, std::uint64_t window, int what) {
  const std::uint64_t h = fnv1a64(std::to_string(rank) + ":" + std::to_string(window) + ":" + std::to_string(what));
  return static_cast<double>(h % 2001) / 1000.0 - 1.0;
}

}  // namespace

SyntheticJob::SyntheticJob(int ranks, int gpus_per_node, int tp, int pp, double iter_ms, int microbatches)
    : ranks_(ranks), gpus_per_node_(gpus_per_node), tp_(tp), dp_(0), pp_(pp), iter_ms_(iter_ms),
      microbatches_(microbatches) {
  if (ranks <= 0 || gpus_per_node <= 0 || tp <= 0 || pp <= 0 || microbatches <= 0 || !(iter_ms > 0) ||
      !std::isfinite(iter_ms)) {
    throw std::invalid_argument("ranks, GPUs per node, TP, PP, micro-batches and the iteration time must be positive");
  }
  if (ranks % (tp * pp) != 0) throw std::invalid_argument("TP x PP must divide the ranks");
  if (ranks % gpus_per_node != 0) throw std::invalid_argument("the GPUs per node must divide the ranks");
  dp_ = ranks / (tp * pp);
  tp_of_.resize(static_cast<std::size_t>(ranks));
  dp_of_.resize(static_cast<std::size_t>(ranks));
  pp_of_.resize(static_cast<std::size_t>(ranks));
  auto add = [&](const std::string& kind, int index, std::vector<int> members,
                 std::map<std::string, int> per_iteration, std::vector<std::uint64_t>& of) {
    if (members.size() < 2) return;  // a dimension of one: no communicator
    SyntheticGroup g;
    g.id = fnv1a64("load-bench:" + kind + ":" + std::to_string(index));
    g.kind = kind;
    for (const auto& [op, n] : per_iteration) g.ops[op] = static_cast<std::uint64_t>(n) * kIterationsSeen;
    for (int r : members) of[static_cast<std::size_t>(r)] = g.id;
    g.members = std::move(members);
    groups_.push_back(std::move(g));
  };
  const ParallelShape shape = this->shape();
  for (int p = 0; p < pp_; ++p) {
    for (int d = 0; d < dp_; ++d) {
      std::vector<int> m;
      for (int t = 0; t < tp_; ++t) m.push_back(shape.rank({t, d, p}));
      add("tp", p * dp_ + d, std::move(m), {{"AllReduce:8388608", kTpCalls}}, tp_of_);
    }
  }
  for (int p = 0; p < pp_; ++p) {
    for (int t = 0; t < tp_; ++t) {
      add("dp", p * tp_ + t, shape.dp_group(t, p), {{"AllReduce:268435456", kDpCalls}}, dp_of_);
    }
  }
  for (int d = 0; d < dp_; ++d) {
    for (int t = 0; t < tp_; ++t) {
      add("pp", d * tp_ + t, shape.pp_group(t, d),
          {{"Recv:16777216", kPpCallsPerMicrobatch / 2 * microbatches_},
           {"Send:16777216", kPpCallsPerMicrobatch / 2 * microbatches_}},
          pp_of_);
    }
  }
}

JobLayout SyntheticJob::layout() const {
  JobLayout l;
  l.tp = tp_;
  l.dp = dp_;
  l.pp = pp_;
  l.world = ranks_;
  l.microbatches.assign(static_cast<std::size_t>(dp_), microbatches_);
  l.initial_microbatches = l.microbatches;
  l.gpus_per_node = gpus_per_node_;
  return l;
}

double SyntheticJob::iteration_ms(const std::optional<SlowGpu>& slow) const {
  const double extra = slow ? kCompute * iter_ms_ * (slow->factor - 1.0) : 0.0;
  return iter_ms_ + std::max(0.0, extra);
}

ProfileReport SyntheticJob::profile(int rank, const std::string& request, double window_s,
                                    const std::optional<SlowGpu>& slow, std::uint64_t window) const {
  const double t = iteration_ms(slow);
  const double extra = t - iter_ms_;
  const RankCoords me = shape().coords(rank);
  double tp_ms = kTp * iter_ms_, dp_ms = kDp * iter_ms_, pp_ms = kPp * iter_ms_;
  if (slow && rank != slow->rank) {  // where this rank waits for the slow one
    const RankCoords s = shape().coords(slow->rank);
    if (me.dp == s.dp && me.pp == s.pp) {
      tp_ms += extra;
    } else if (me.dp == s.dp) {
      pp_ms += extra;
    } else {
      dp_ms += extra;
    }
  }
  tp_ms *= 1.0 + 0.01 * jitter(rank, window, 0);
  dp_ms *= 1.0 + 0.01 * jitter(rank, window, 1);
  pp_ms *= 1.0 + 0.01 * jitter(rank, window, 2);
  const double iter = t * (1.0 + 0.002 * jitter(rank, window, 3));

  ProfileReport p;
  p.request = request;
  p.window_s = window_s;
  p.iterations = static_cast<int>(window_s * 1000.0 / iter);
  p.iter_ms = p.iterations > 0 ? iter : 0.0;
  const std::size_t r = static_cast<std::size_t>(rank);
  const double per_s = 1000.0 / iter;
  const int tp_calls = kTpCalls, dp_calls = kDpCalls, pp_calls = kPpCallsPerMicrobatch * microbatches_;
  // A parallel dimension of one has no group (a communicator of one rank makes no calls worth timing).
  if (tp_ > 1) p.groups[tp_of_[r]] = {tp_ms / iter, tp_calls * per_s};
  if (dp_ > 1) p.groups[dp_of_[r]] = {dp_ms / iter, dp_calls * per_s};
  if (pp_ > 1) p.groups[pp_of_[r]] = {pp_ms / iter, pp_calls * per_s};
  double comm = 0;
  for (const auto& [id, share] : p.groups) comm += share.share;
  p.comm_share = comm;
  p.timings = static_cast<std::int64_t>(window_s * per_s * (tp_calls + dp_calls + pp_calls));
  return p;
}

}  // namespace greyhound::bench
