#include <gtest/gtest.h>

#include <map>
#include <string>

#include "greyhound/config.h"

namespace greyhound {
namespace {

std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST(EnvConfig, Defaults) {
  g_env.clear();
  const EnvConfig c = read_env_config(&fake_getenv);
  EXPECT_EQ(c.job, "default");
  EXPECT_FALSE(c.disable);
  EXPECT_EQ(c.shm_dir, "/dev/shm");
  EXPECT_EQ(c.ring_records, 32768u);
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_TRUE(c.warnings.empty());
}

TEST(EnvConfig, ReadsEveryVariable) {
  g_env = {{"GREYHOUND_JOB", "j1"},          {"GREYHOUND_DISABLE", "1"},    {"GREYHOUND_SHM_DIR", "/x"},
           {"GREYHOUND_RING_RECORDS", "128"}, {"GREYHOUND_LOG_LEVEL", "debug"}, {"GREYHOUND_REDIS", "redis://h:1/0"},
           {"RANK", "5"},                     {"LOCAL_RANK", "1"}};
  const EnvConfig c = read_env_config(&fake_getenv);
  EXPECT_EQ(c.job, "j1");
  EXPECT_TRUE(c.disable);
  EXPECT_EQ(c.shm_dir, "/x");
  EXPECT_EQ(c.ring_records, 128u);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.redis, "redis://h:1/0");
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.local_rank, 1);
}

TEST(EnvConfig, GreyhoundRankWinsOverLauncherVariables) {
  g_env = {{"GREYHOUND_RANK", "9"}, {"RANK", "5"}, {"SLURM_PROCID", "3"}};
  EXPECT_EQ(read_env_config(&fake_getenv).rank, 9);
  g_env = {{"SLURM_PROCID", "3"}};
  EXPECT_EQ(read_env_config(&fake_getenv).rank, 3);
}

TEST(EnvConfig, BadValuesWarnAndKeepDefaults) {
  g_env = {{"GREYHOUND_DISABLE", "maybe"}, {"GREYHOUND_RING_RECORDS", "12x"}, {"GREYHOUND_LOG_LEVEL", "loud"},
           {"RANK", "-2"}};
  const EnvConfig c = read_env_config(&fake_getenv);
  EXPECT_FALSE(c.disable);
  EXPECT_EQ(c.ring_records, 32768u);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_EQ(c.rank, -1);
  ASSERT_EQ(c.warnings.size(), 4u);
  EXPECT_NE(c.warnings[0].find("GREYHOUND_DISABLE"), std::string::npos);
}

TEST(EnvConfig, NodeEpochAndPasswordFile) {
  g_env = {{"SLURM_NODEID", "3"}, {"GREYHOUND_JOB_EPOCH_NS", "123456789"}, {"GREYHOUND_REDIS_PASSWORD_FILE", "/p"}};
  EnvConfig c = read_env_config(&fake_getenv);
  EXPECT_EQ(c.node, 3);
  EXPECT_EQ(c.job_epoch_ns, 123456789u);
  EXPECT_EQ(c.redis_password_file, "/p");
  EXPECT_FALSE(c.log_level_set);
  EXPECT_TRUE(c.warnings.empty());
  g_env = {{"GREYHOUND_NODE", "1"}, {"NODE_RANK", "2"}};  // the first one set wins
  EXPECT_EQ(read_env_config(&fake_getenv).node, 1);
  g_env = {{"GREYHOUND_NODE", "x"}, {"GREYHOUND_JOB_EPOCH_NS", "-5"}, {"GREYHOUND_LOG_LEVEL", "loud"}};
  c = read_env_config(&fake_getenv);
  EXPECT_EQ(c.node, 0);
  EXPECT_EQ(c.job_epoch_ns, 0u);
  EXPECT_FALSE(c.log_level_set);
  EXPECT_EQ(c.warnings.size(), 3u);
}

}  // namespace
}  // namespace greyhound
