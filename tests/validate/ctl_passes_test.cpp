// greyhoundctl passes, run as a process: the contract ({"passes":[[[src,dst],...],...]}, ranks as
// given), the graph-dump order, and bad input answered with one error line and exit status 2.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/command.h"

namespace {

using Outcome = greyhound::test::CommandOutcome;

Outcome run(const std::string& args) {
  return greyhound::test::run_command_line(std::string(GREYHOUNDCTL) + " passes " + args + " 2>&1");
}

TEST(CtlPasses, RingAndTreeOfTheRanksAsGiven) {
  Outcome o = run("--topology ring --ranks 3,0,1,2");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[3,0],[1,2]],[[0,1],[2,3]]]}\n");
  o = run("--topology tree --ranks 5,6,7,8");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[5,6]],[[6,8]],[[5,7]]]}\n");
}

TEST(CtlPasses, TheRingOrderOfAGraphDump) {
  const std::string dump = std::string(GREYHOUND_VALIDATE_DATA) + "/graph-dump-2nodes.xml";
  Outcome o = run("--topology ring --graph-dump " + dump + " --channel 1");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "{\"passes\":[[[2,3],[1,0]],[[3,1],[0,2]]]}\n");
}

TEST(CtlPasses, BadInputIsOneLineAndExitStatus2) {
  for (const char* args : {"--topology star --ranks 0,1", "--topology ring", "--topology ring --ranks 0,x",
                           "--topology ring --ranks 0,1,0", "--topology tree --graph-dump /nonexistent",
                           "--topology ring --graph-dump /nonexistent", "--topology ring --ranks 0,1 --channel 2", "--topology ring --ranks 4"}) {
    const Outcome o = run(args);
    EXPECT_EQ(o.status, 2) << args << ": " << o.out;
    EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 1) << args << ": " << o.out;
  }
}

}  // namespace
