#include "sim/pipeline_schedule.h"

#include <algorithm>

namespace greyhound::sim {

std::vector<PipeStep> one_f_one_b(int stage, int stages, int microbatches) {
  std::vector<PipeStep> out;
  const bool first = stage == 0;
  const bool last = stage == stages - 1;
  const int warmup = std::min(stages - stage - 1, microbatches);
  const int remaining = microbatches - warmup;
  for (int i = 0; i < warmup; ++i) {
    if (!first) out.push_back({PipeAction::kRecvForward, i});
    out.push_back({PipeAction::kForward, i});
    if (!last) out.push_back({PipeAction::kSendForward, i});
  }
  if (remaining > 0 && !first) out.push_back({PipeAction::kRecvForward, warmup});
  for (int i = 0; i < remaining; ++i) {
    const int fwd = warmup + i;
    out.push_back({PipeAction::kForward, fwd});
    if (!last) out.push_back({PipeAction::kSendForwardRecvBackward, fwd, i});
    out.push_back({PipeAction::kBackward, i});
    if (!first) {
      if (i == remaining - 1) {
        out.push_back({PipeAction::kSendBackward, i});
      } else {
        out.push_back({PipeAction::kSendBackwardRecvForward, i, fwd + 1});
      }
    }
  }
  for (int i = remaining; i < microbatches; ++i) {
    if (!last) out.push_back({PipeAction::kRecvBackward, i});
    out.push_back({PipeAction::kBackward, i});
    if (!first) out.push_back({PipeAction::kSendBackward, i});
  }
  return out;
}

}  // namespace greyhound::sim
