// greyhoundctl plan-microbatches, run as a process: the issue's test vector and its JSON contract, and
// bad input answered with one error line and exit status 2.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/command.h"

namespace {

using Outcome = greyhound::test::CommandOutcome;

Outcome run(const std::string& args) {
  return greyhound::test::run_command_line(std::string(GREYHOUNDCTL) + " plan-microbatches " + args + " 2>&1");
}

TEST(CtlPlanMicrobatches, IssueTestVector) {
  const Outcome o = run("--times 1052.28,1471.5,1052.28,1052.28 --total 32 --current 8,8,8,8");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"microbatches\":[9,6,9,8],\"makespan_ms\":9470.52}\n");
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j.at("makespan_ms").get<double>(), 9470.52);
}

TEST(CtlPlanMicrobatches, PipelineDepthAndEqualsForm) {
  const Outcome o = run("--times=1,1,1,2 --total=32 --pp=4 --current=8,8,8,8");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"microbatches\":[12,8,8,4],\"makespan_ms\":12.0}\n");
}

TEST(CtlPlanMicrobatches, FillSlotsAsTheMastersPlannerUsesThem) {
  // Slot times 48 and 62.4 on PP 2, single micro-batches, fill P - 1 = 1: [9,7] (makespan max(480, 499.2)).
  Outcome o = run("--times 48,62.4 --total 16 --fill 1 --current 8,8");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"microbatches\":[9,7],\"makespan_ms\":499.2}\n");
  o = run("--times 48,62.4 --total 16 --pp 2 --fill 1 --current 8,8");  // in multiples of 2: [10,6]
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"microbatches\":[10,6],\"makespan_ms\":528.0}\n");
  o = run("--times 1,1 --total 4 --fill -1");
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.out, "greyhoundctl plan-microbatches: fill slots -1: they must be within 0..2^40\n");
}

TEST(CtlPlanMicrobatches, BadInputIsOneLineAndExitStatus2) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"--times 1,0 --total 4", "time of DP group 1 is 0: times must be finite and > 0"},
      {"--times 1,x --total 4", "--times: 'x' is not a finite number"},
      {"--times 1,1 --total 3 --pp 2",
       "total 3 is not a multiple of the pipeline depth 2 (1F1B needs every m_i to be a multiple of P)"},
      {"--times 1,1,1 --total 2", "total 2 is less than the number of DP groups 3: every DP group needs a micro-batch"},
      {"--times 1,1 --total 4 --current 3,3", "current allocation sums to 6, expected the total 4"},
      {"--times 1,1 --total 4 --current 4", "current allocation has 1 entries, expected 2 (one per DP group)"},
      {"--total 4", "--times is required"},
      {"--times 1,1", "--total is required"},
      {"--times 1,1 --total 4 --bogus 1", "unknown flag --bogus"},
  };
  for (const auto& c : cases) {
    const Outcome o = run(c.args);
    EXPECT_EQ(o.status, 2) << c.args;
    EXPECT_EQ(o.out, std::string("greyhoundctl plan-microbatches: ") + c.message + "\n") << c.args;
  }
}

}  // namespace
