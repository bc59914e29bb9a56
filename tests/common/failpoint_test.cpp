// The fail points of the fault matrix: each case in a process of its own (a death test), since the
// variable is read once per process.
#include "common/failpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace greyhound {
namespace {

std::string lay_token() {
  char tmpl[] = "/tmp/gh-failpoint-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  return tmpl;
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

TEST(Failpoint, ExitsAtItsNameOnceWhileTheTokenIsThere) {
  const std::string token = lay_token();
  EXPECT_EXIT(
      {
        setenv("GREYHOUND_FAILPOINT", ("plan_published:" + token).c_str(), 1);
        failpoint("profile_sent");  // another fail point: nothing
        failpoint("plan_published");
        std::exit(0);
      },
      ::testing::ExitedWithCode(kFailpointExit), "fail point plan_published reached");
  EXPECT_FALSE(exists(token)) << "the token is taken";
  // Once: a process started again with the same variable goes past it.
  EXPECT_EXIT(
      {
        setenv("GREYHOUND_FAILPOINT", ("plan_published:" + token).c_str(), 1);
        failpoint("plan_published");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Failpoint, UnsetOrMalformedArmsNothing) {
  const std::string token = lay_token();
  EXPECT_EXIT(
      {
        unsetenv("GREYHOUND_FAILPOINT");
        failpoint("plan_published");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("GREYHOUND_FAILPOINT", "plan_published", 1);  // no token file
        failpoint("plan_published");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "GREYHOUND_FAILPOINT must be <name>:<token file>; ignored");
  EXPECT_TRUE(exists(token));
  unlink(token.c_str());
}

}  // namespace
}  // namespace greyhound
