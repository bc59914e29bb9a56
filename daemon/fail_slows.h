// The fail-slows of one job, each tracked on its own: what a localisation shows (findings), which open
// fail-slow a finding is more evidence of, and when one ends. Pure: localisations in, changes out; the
// controller (daemon/controller.h) keeps their ski-rental accounts and the remedies.
//
// Rules:
//  - Findings of a localisation: its culprit when the cause is computation or host (one fail-slow at that
//    rank), and every suspect link the culprit does not explain (one fail-slow per link).
//  - An open fail-slow is still there when the localisation names its rank again (computation or host; the
//    two may swap as evidence grows, until a validation measured its GPU: settle_cause), or, with the
//    layout, its rank still spends still_slow_ratio x the
//    median of its pipeline stage's other ranks outside NCCL per micro-batch (a micro-batch split balances
//    the waits, so the culprit may no longer arrive last; its own compute still shows); a link when it is
//    still among the suspect links, or a transfer crossing it is still slow_link_ratio x its reference
//    (however little it carries: after S3 moved the heavy traffic off it). A link no group crossed was not
//    observed: no evidence either way, so it does not end.
//  - A localisation whose window measured no iteration time tells nothing: the controller does not track it.
//  - One that `end_after_misses` localisations in a row did not show has ended: its evidence is gone,
//    whatever else is still slow.
//  - A finding that no open fail-slow accounts for opens one (when opening is allowed: an incident is open,
//    or fail-slows are).
#pragma once

#include <cstdint>
#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "daemon/localiser.h"
#include "greyhound/thresholds.h"
#include "store/messages.h"

namespace greyhound::master {

struct Finding {
  Cause cause = Cause::kUnknown;
  int rank = -1, node = -1;    // computation / host
  int link_a = -1, link_b = -1;  // communication
  double severity = 1;
};
std::vector<Finding> findings(const Localisation& loc);

struct FailSlowRules {
  double still_slow_ratio = kPeerExcessRatio;
  double slow_link_ratio = 1.5;  // a transfer this much over its reference: its link is still slow
  int end_after_misses = 1;
};

// Whether `loc` still shows `f` (and how severe it looks).
std::optional<double> sighting(const Localisation& loc, const FailSlow& f, const std::optional<JobLayout>& layout,
                               const FailSlowRules& rules);

// Whether `loc` could see `f` at all: a link some group of the localisation crossed (a rank's fail-slow
// always).
bool observed(const Localisation& loc, const FailSlow& f);

struct FailSlowChanges {
  std::vector<FailSlow> opened;  // new, with ids from `total`
  std::vector<FailSlow> ended;   // no longer in `open`
  std::vector<FailSlow> seen;    // still open, updated
};

// Applies one localisation made at job time `t_s` to `open` (ids from `total`). `incident` and `onset_t_s`
// go into the fail-slows it opens; `may_open`: whether a finding may open one.
FailSlowChanges track(std::vector<FailSlow>& open, std::int64_t& total, const Localisation& loc,
                      const std::optional<JobLayout>& layout, std::int64_t incident, double onset_t_s, double t_s,
                      bool may_open, const FailSlowRules& rules);

// A validation's verdict on a rank's GPU settles what the profile could only infer, for the fail-slows it
// validated (`ids`) on that rank: a slow GEMM makes the cause computation, one as fast as its peers' host
// (both get S2 alike; the cause is what the operator reads). The cause then stays: a later localisation does
// not swap it (cause_validated). Returns the fail-slows whose cause changed.
std::vector<FailSlow> settle_cause(std::vector<FailSlow>& open, const ValidatedReport& v,
                                   const std::set<std::int64_t>& ids);

}  // namespace greyhound::master
