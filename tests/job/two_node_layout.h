// The job tests' usual layout through the C API (greyhound/job.h): TP 1 x DP 2 x PP 2 on two nodes of two
// GPUs, `in_force` the micro-batches per replica (pointed to: it must outlive the layout), `capabilities`.
#pragma once

#include <cstdint>
#include <vector>

#include "greyhound/job.h"

namespace greyhound::test_support {

inline greyhound_job_layout two_node_c_layout(const std::vector<int32_t>& in_force, uint32_t capabilities) {
  greyhound_job_layout l{};
  l.tp = 1;
  l.dp = 2;
  l.pp = 2;
  l.world = 4;
  l.microbatches = in_force.data();
  l.microbatches_len = in_force.size();
  l.capabilities = capabilities;
  l.gpus_per_node = 2;
  return l;
}

}  // namespace greyhound::test_support
