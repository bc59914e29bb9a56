// The job's check of a plan against its layout (job/plan_check.h) and the master's check of an operator's
// plan (daemon/operator_plan.h) on any layout, plan and request: they never crash, and what they let through
// keeps the job's shape and its global batch. Input: layout text, a 0 byte, plan text, a 0 byte, request
// text (a missing part is empty).
#include <numeric>
#include <string>
#include <vector>

#include "daemon/operator_plan.h"
#include "fuzz/fuzz_check.h"
#include "job/plan_check.h"
#include "store/messages.h"

namespace {

namespace gh = greyhound;
using greyhound::fuzz::check;

std::vector<std::string> parts(const std::string& text, std::size_t n) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (out.size() + 1 < n) {
    const std::size_t zero = text.find('\0', from);
    if (zero == std::string::npos) break;
    out.push_back(text.substr(from, zero - from));
    from = zero + 1;
  }
  out.push_back(text.substr(std::min(from, text.size())));
  out.resize(n);
  return out;
}

long total(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0L); }

// What any plan a job applies must keep: one micro-batch count per replica, each >= 1 and a multiple of what the
// job's schedule needs, the same global batch;
// a placement that is a permutation of the layout's roles.
void keeps_the_job(const gh::JobLayout& layout, const gh::Plan& plan, const std::vector<gh::PlacementEntry>& placement) {
  if (!plan.microbatches.empty()) {
    check(plan.microbatches.size() == static_cast<std::size_t>(layout.dp), "one micro-batch count per replica");
    for (int m : plan.microbatches) {
      check(m >= 1, "every replica keeps a micro-batch");
      check(gh::schedule_takes(layout, m), "the schedule's multiple is kept");
    }
    check(total(plan.microbatches) == total(layout.microbatches), "the global batch is kept");
  }
  if (!placement.empty()) check(gh::placement_error(layout, placement).empty(), "the placement fits the layout");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto p = parts(greyhound::fuzz::text_of(data, size), 3);
  std::string error;
  const auto layout = gh::parse_job_layout(p[0], &error);
  if (!layout) return 0;
  (void)gh::job::check_layout(*layout);

  if (const auto plan = gh::parse_plan(p[1], &error)) {
    for (std::int64_t last : {std::int64_t{0}, plan->epoch - 1, plan->epoch, plan->epoch + 1}) {
      const gh::job::PlanCheck c = gh::job::check_plan(*layout, *plan, last);
      if (c.verdict == gh::job::Verdict::kAccept) keeps_the_job(*layout, *plan, c.placement);
      check(c.verdict == gh::job::Verdict::kAccept || c.verdict == gh::job::Verdict::kSeen || !c.reason.empty(),
            "a refusal says why");
    }
  }

  if (const auto req = gh::parse_operator_plan_request(p[2], &error)) {
    const gh::master::OperatorPlanCheck c = gh::master::check_operator_plan(*req, *layout);
    check(!c.plan || c.error.empty(), "a plan to publish is not refused");
    if (c.plan) {
      // What the master publishes for an operator, the job applies (given an epoch, as the master does).
      gh::Plan published = *c.plan;
      published.epoch = 1;
      const gh::job::PlanCheck job = gh::job::check_plan(*layout, published, 0);
      const bool advertised = job.verdict != gh::job::Verdict::kUnsupported;
      check(!advertised || job.verdict == gh::job::Verdict::kAccept,
            "the job accepts the operator's checked plan: " + job.reason);
      if (job.verdict == gh::job::Verdict::kAccept) keeps_the_job(*layout, published, job.placement);
    }
  }
  return 0;
}
