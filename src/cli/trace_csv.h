// The two recorded-data files greyhoundctl reads (period --ops, detect --trace), as text in, rows out: pure,
// so the fuzzer (fuzz/) and the command read them the same way.
//
//   op trace:        header t_ns,op,group,bytes; one NCCL call per row (t_ns and bytes non-negative integers,
//                    t_ns never decreasing; op and group any non-empty token)
//   iteration trace: header t_s,iter_ms; one row per iteration (t_s >= 0, never decreasing; iter_ms in
//                    [0.001, 1e9]: beyond, ratios between iterations are not finite numbers)
// Cells are trimmed of blanks; blank lines are skipped; a '\r' before the newline is dropped. The first error
// fails the whole file with "row R, column C (name): what" (R: 1-based line number), quoting at most 64 bytes
// of the cell.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "greyhound/result.h"

namespace greyhound::ctl {

struct OpRow {
  std::uint64_t t_ns = 0;
  std::string_view op;     // views into the text given
  std::string_view group;
  std::uint64_t bytes = 0;
};

struct IterationRow {
  double t_s = 0;
  double iter_ms = 0;
};

Result<std::vector<OpRow>> read_op_trace(std::string_view text);
Result<std::vector<IterationRow>> read_iteration_trace(std::string_view text);

}  // namespace greyhound::ctl
