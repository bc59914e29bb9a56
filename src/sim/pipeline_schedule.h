// The 1F1B pipeline schedule of one stage, as Megatron-LM's forward_backward_pipelining_without_interleaving
// runs it: warm-up forwards, steady one-forward-one-backward with fused send/receive pairs, cool-down
// backwards. Pure: the list of actions a stage performs, in order.
#pragma once

#include <string>
#include <vector>

namespace greyhound::sim {

enum class PipeAction {
  kRecvForward,              // receive micro-batch `mb`'s activations from stage - 1
  kForward,                  // forward pass of `mb`
  kSendForward,              // send `mb`'s activations to stage + 1
  kSendForwardRecvBackward,  // one group: send `mb`'s activations, receive `mb2`'s gradient (stage + 1)
  kBackward,                 // backward pass of `mb`
  kSendBackward,             // send `mb`'s input gradient to stage - 1
  kSendBackwardRecvForward,  // one group: send `mb`'s gradient, receive `mb2`'s activations (stage - 1)
  kRecvBackward,             // receive `mb`'s gradient from stage + 1
};

struct PipeStep {
  PipeAction action;
  int mb;
  int mb2 = -1;
};

// Steps of stage `stage` of `stages`, for `microbatches` micro-batches. Communication with a stage that
// does not exist (before the first, after the last) is left out, as Megatron does.
std::vector<PipeStep> one_f_one_b(int stage, int stages, int microbatches);

}  // namespace greyhound::sim
