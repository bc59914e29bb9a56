#include "greyhound/mitigate/topology_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <vector>

namespace greyhound::mitigate {
namespace {

struct Key {
  double time = 0.0;
  double load = 0.0;
  int straggler_stages = 0;
  int edge_stragglers = 0;
  int moved = 0;
  long long distance = 0;
};

// -1, 0 or 1 as a is smaller than, within 1e-9 relative of, or larger than b.
int compare(double a, double b) {
  const double tol = 1e-9 * std::max(std::abs(a), std::abs(b));
  return a < b - tol ? -1 : a > b + tol ? 1 : 0;
}

bool better(const Key& a, const Key& b) {
  if (const int c = compare(a.time, b.time); c != 0) return c < 0;
  if (const int c = compare(a.load, b.load); c != 0) return c < 0;
  if (a.straggler_stages != b.straggler_stages) return a.straggler_stages < b.straggler_stages;
  if (a.edge_stragglers != b.edge_stragglers) return a.edge_stragglers < b.edge_stragglers;
  if (a.moved != b.moved) return a.moved < b.moved;
  return a.distance < b.distance;
}

class Search {
 public:
  Search(const CostModel& model, const Placement& current, const TopologyPlanOptions& opt)
      : model_(model), current_(current), opt_(opt), dp_(model.job().dp), pp_(model.job().pp) {
    original_node_.assign(current.size(), 0);
    for (std::size_t s = 0; s < current.size(); ++s) {
      original_node_[index(current[s])] = model.node_of_slot(static_cast<int>(s));
    }
    for (int s = 0; s < model.slots(); ++s) {
      straggler_.push_back(model.slot_slowdown(s) > opt.straggler_slowdown);
    }
  }

  Key key(const Placement& p) const {
    Key k;
    const IterationEstimate e = model_.estimate(p);
    k.time = e.iteration_s;
    k.load = e.load_s;
    std::vector<int> per_stage(static_cast<std::size_t>(pp_), 0);
    for (std::size_t s = 0; s < p.size(); ++s) {
      if (straggler_[s]) ++per_stage[static_cast<std::size_t>(p[s].pp)];
      if (!(p[s] == current_[s])) {
        ++k.moved;
        k.distance += std::llabs(model_.node_of_slot(static_cast<int>(s)) - original_node_[index(p[s])]);
      }
    }
    for (int st = 0; st < pp_; ++st) {
      const int n = per_stage[static_cast<std::size_t>(st)];
      if (n > 0) ++k.straggler_stages;
      if (pp_ >= 3 && (st == 0 || st == pp_ - 1)) k.edge_stragglers += n;
    }
    return k;
  }

  // Stragglers into the fewest stages, inner stages first, each to the nearest free slot.
  Placement gathered() const {
    Placement p = current_;
    std::vector<int> stragglers;
    for (int s = 0; s < model_.slots(); ++s) {
      if (straggler_[static_cast<std::size_t>(s)]) stragglers.push_back(s);
    }
    if (stragglers.empty() || pp_ < 2) return p;
    std::stable_sort(stragglers.begin(), stragglers.end(),
                     [&](int a, int b) { return model_.slot_slowdown(a) > model_.slot_slowdown(b); });
    const int needed = (static_cast<int>(stragglers.size()) + dp_ - 1) / dp_;
    if (needed >= pp_) return p;
    std::vector<int> count(static_cast<std::size_t>(pp_), 0);
    for (int s : stragglers) ++count[static_cast<std::size_t>(p[static_cast<std::size_t>(s)].pp)];
    std::vector<int> stages(static_cast<std::size_t>(pp_));
    std::iota(stages.begin(), stages.end(), 0);
    auto inner = [&](int st) { return pp_ < 3 || (st != 0 && st != pp_ - 1); };
    std::stable_sort(stages.begin(), stages.end(), [&](int a, int b) {
      if (inner(a) != inner(b)) return inner(a);
      return count[static_cast<std::size_t>(a)] > count[static_cast<std::size_t>(b)];
    });
    std::vector<bool> target(static_cast<std::size_t>(pp_), false);
    for (int i = 0; i < needed; ++i) target[static_cast<std::size_t>(stages[static_cast<std::size_t>(i)])] = true;
    std::vector<int> free_slots;
    for (int s = 0; s < model_.slots(); ++s) {
      if (!straggler_[static_cast<std::size_t>(s)] && target[static_cast<std::size_t>(p[static_cast<std::size_t>(s)].pp)]) {
        free_slots.push_back(s);
      }
    }
    for (int s : stragglers) {
      if (target[static_cast<std::size_t>(p[static_cast<std::size_t>(s)].pp)]) continue;
      auto best = free_slots.end();
      for (auto it = free_slots.begin(); it != free_slots.end(); ++it) {
        if (best == free_slots.end() || std::abs(model_.node_of_slot(*it) - model_.node_of_slot(s)) <
                                            std::abs(model_.node_of_slot(*best) - model_.node_of_slot(s))) {
          best = it;
        }
      }
      if (best == free_slots.end()) break;
      std::swap(p[static_cast<std::size_t>(s)], p[static_cast<std::size_t>(*best)]);
      free_slots.erase(best);
    }
    return p;
  }

  // Best-improvement swaps until none improves the key.
  Placement descend(Placement p, Key* out) const {
    Key k = key(p);
    const int slots = model_.slots();
    const int rounds = opt_.max_rounds > 0 ? opt_.max_rounds : 4 * slots;
    for (int round = 0; round < rounds; ++round) {
      Key best = k;
      int best_a = -1;
      int best_b = -1;
      for (int a = 0; a < slots; ++a) {
        for (int b = a + 1; b < slots; ++b) {
          auto& ra = p[static_cast<std::size_t>(a)];
          auto& rb = p[static_cast<std::size_t>(b)];
          std::swap(ra, rb);
          const Key c = key(p);
          std::swap(ra, rb);
          if (better(c, best)) {
            best = c;
            best_a = a;
            best_b = b;
          }
        }
      }
      if (best_a < 0) break;
      std::swap(p[static_cast<std::size_t>(best_a)], p[static_cast<std::size_t>(best_b)]);
      k = best;
    }
    *out = k;
    return p;
  }

 private:
  std::size_t index(const Role& r) const { return static_cast<std::size_t>(r.dp + dp_ * r.pp); }

  const CostModel& model_;
  const Placement& current_;
  const TopologyPlanOptions& opt_;
  int dp_;
  int pp_;
  std::vector<int> original_node_;  // by role index: the node that holds the role now
  std::vector<bool> straggler_;     // by slot
};

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

}  // namespace

Result<TopologyPlan> TopologyPlanner::plan(const Placement& current, const TopologyPlanOptions& opt) const {
  using R = Result<TopologyPlan>;
  if (auto err = placement_error(current, model_.job().dp, model_.job().pp)) return R::failure(*err);
  if (!std::isfinite(opt.pause_s) || opt.pause_s < 0.0) return R::failure("pause_s must be finite and >= 0");
  if (!std::isfinite(opt.horizon_s) || opt.horizon_s < 0.0) return R::failure("horizon_s must be finite and >= 0");
  if (!std::isfinite(opt.straggler_slowdown)) return R::failure("straggler_slowdown must be finite");
  if (opt.max_rounds < 0) return R::failure("max_rounds must be >= 0");

  const Search search(model_, current, opt);
  const Key now = search.key(current);
  Key best_key = now;
  Placement best = current;
  for (const Placement& seed : {current, search.gathered()}) {
    Key k;
    Placement p = search.descend(seed, &k);
    if (better(k, best_key)) {
      best_key = k;
      best = std::move(p);
    }
  }

  TopologyPlan plan;
  plan.current_iteration_s = now.time;
  // Only a placement predicted strictly faster is ever proposed; otherwise the current one stands.
  const double tol = 1e-9 * now.time;
  if (!(best_key.time < now.time - tol)) {
    best = current;
    best_key = now;
  }
  plan.placement = std::move(best);
  plan.predicted_iteration_s = best_key.time;
  plan.moved_slots = best_key.moved;
  plan.saving_s = now.time > 0.0 ? opt.horizon_s * (1.0 - best_key.time / now.time) : 0.0;
  plan.worthwhile = best_key.moved > 0 && plan.saving_s > opt.pause_s;
  if (best_key.moved == 0) {
    plan.reason = "no placement is predicted faster than the current " + fmt(now.time) + " s";
  } else {
    plan.reason = "moving " + std::to_string(best_key.moved) + " TP groups is predicted to take the iteration from " +
                  fmt(now.time) + " s to " + fmt(best_key.time) + " s, saving " + fmt(plan.saving_s) +
                  " s over the " + fmt(opt.horizon_s) + " s horizon " +
                  (plan.worthwhile ? "> " : "<= ") + "the " + fmt(opt.pause_s) + " s pause";
  }
  return plan;
}

}  // namespace greyhound::mitigate
