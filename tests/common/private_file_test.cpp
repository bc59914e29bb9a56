// Files in directories other users may write to: only this user's own regular files and directories are
// trusted, never through a symbolic link.
#include "common/private_file.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace greyhound {
namespace {

class PrivateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-private-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(PrivateFileTest, CreatesAFileOnlyThisUserCanWrite) {
  std::string err;
  const int fd = open_private_file(dir_ + "/lock", &err);
  ASSERT_GE(fd, 0) << err;
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  ::close(fd);
  const int again = open_private_file(dir_ + "/lock", &err);  // an existing one of ours is reused
  EXPECT_GE(again, 0) << err;
  ::close(again);
}

TEST_F(PrivateFileTest, RefusesALinkAnotherUsersFileAndAWritableOne) {
  const std::string victim = dir_ + "/victim";
  {
    FILE* f = std::fopen(victim.c_str(), "w");
    std::fputs("precious", f);
    std::fclose(f);
  }
  ASSERT_EQ(symlink(victim.c_str(), (dir_ + "/lock").c_str()), 0);
  std::string err;
  EXPECT_LT(open_private_file(dir_ + "/lock", &err), 0);
  EXPECT_EQ(err, dir_ + "/lock: is a symbolic link");

  ASSERT_EQ(chmod(victim.c_str(), 0666), 0);
  EXPECT_LT(open_private_file(victim, &err), 0);
  EXPECT_NE(err.find("writable by other users (mode 0666)"), std::string::npos) << err;

  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_NE(file_trust_problem(st, geteuid() + 1).find("owned by uid " + std::to_string(geteuid()) + ", not by uid"),
            std::string::npos);
  EXPECT_EQ(st.st_size, 8);  // never truncated
}

TEST_F(PrivateFileTest, ADirectoryIsCreatedPrivateOrReusedOnlyWhenPrivate) {
  std::string err;
  const std::string fresh = dir_ + "/work";
  ASSERT_TRUE(ensure_private_directory(fresh, &err)) << err;
  struct stat st {};
  ASSERT_EQ(stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(ensure_private_directory(fresh, &err)) << err;  // ours: reused

  const std::string shared = dir_ + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);  // what another user pre-creating it would leave
  EXPECT_FALSE(ensure_private_directory(shared, &err));
  EXPECT_NE(err.find("writable by other users (mode 1777)"), std::string::npos) << err;

  ASSERT_EQ(symlink(fresh.c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_FALSE(ensure_private_directory(dir_ + "/link", &err));
  EXPECT_NE(err.find("is a symbolic link"), std::string::npos) << err;

  EXPECT_FALSE(ensure_private_directory(dir_ + "/missing/parent", &err));
  EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
}

}  // namespace
}  // namespace greyhound
