// A Redis password never leaves the process that was given it: not in messages, banners nor in the command
// lines of the processes it starts.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/redis_client.h"

namespace greyhound {
namespace {

TEST(RedisUrl, CredentialsAreRedactedInText) {
  EXPECT_EQ(redact_redis_url("redis://:s3cret@db:6380/2"), "redis://***@db:6380/2");
  EXPECT_EQ(redact_redis_url("--redis=redis://alice:pa/ss@db/0"), "--redis=redis://***@db/0");
  EXPECT_EQ(redact_redis_url("redis://db:6379/0"), "redis://db:6379/0");
  EXPECT_EQ(redact_redis_url("a redis://:x@h/0 b redis://:y@g/1"), "a redis://***@h/0 b redis://***@g/1");
  EXPECT_EQ(redact_redis_url("unix:///run/redis.sock"), "unix:///run/redis.sock");
}

TEST(RedisUrl, ParseErrorsNeverQuoteThePassword) {
  try {
    parse_redis_url("redis://:s3cret@");
    FAIL() << "accepted a URL without a host";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing host"), std::string::npos) << e.what();
  }
  try {
    parse_redis_url("redis:/:s3cret@db:6379/0");  // a typo: not a URL at all
    FAIL() << "accepted a malformed URL";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'***@db:6379/0'"), std::string::npos) << e.what();
  }
}

TEST(RedisUrl, AUrlWithoutItsPasswordReadsBackTheSameEndpoint) {
  const RedisEndpoint e = parse_redis_url("redis://alice:s3cret@db.example:6380/3");
  const std::string url = e.url_without_password();
  EXPECT_EQ(url, "redis://alice:@db.example:6380/3");
  const RedisEndpoint back = parse_redis_url(url);
  EXPECT_EQ(back.user, "alice");
  EXPECT_EQ(back.password, "");
  EXPECT_EQ(back.host, "db.example");
  EXPECT_EQ(back.port, 6380);
  EXPECT_EQ(back.db, 3);
  const RedisEndpoint sock = parse_redis_url("unix:///run/redis.sock?db=4");
  EXPECT_EQ(parse_redis_url(sock.url_without_password()).unix_path, "/run/redis.sock");
  EXPECT_EQ(parse_redis_url(sock.url_without_password()).db, 4);
  EXPECT_EQ(parse_redis_url("redis://:pw@h:1/0").url_without_password(), "redis://h:1/0");
}

// Found by fuzz_redis_url: a socket path holding "?db=" or a control byte, or a host with a blank, was
// accepted, and the URL written back for the processes a launcher starts named another endpoint.
TEST(RedisUrl, WhatCannotBeWrittenBackIsRefused) {
  const auto refused = [](const std::string& url) {
    try {
      parse_redis_url(url);
      return std::string("accepted");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(refused("/run/redis.sock?db=3").find("unix:///path?db=N"), std::string::npos);
  EXPECT_NE(refused(std::string("/run/re\0dis.sock", 16)).find("control byte"), std::string::npos);
  EXPECT_NE(refused("unix:///run/re\ndis.sock").find("control byte"), std::string::npos);
  EXPECT_NE(refused("redis://db host:6379/0").find("blank or a control byte"), std::string::npos);
  EXPECT_NE(refused("redis://al ice:pw@db:6379/0").find("blank or a control byte"), std::string::npos);
  EXPECT_EQ(refused("redis://al ice:pw@db:6379/0").find("pw"), std::string::npos);
  // A socket path may hold "?db=" in the unix:// form: the last one is the database.
  const RedisEndpoint odd = parse_redis_url("unix:///run/a?db=3?db=4");
  EXPECT_EQ(odd.unix_path, "/run/a?db=3");
  EXPECT_EQ(odd.db, 4);
  const RedisEndpoint back = parse_redis_url(odd.url_without_password());
  EXPECT_EQ(back.unix_path, odd.unix_path);
  EXPECT_EQ(back.db, 4);
  // A blank is allowed in a socket path.
  EXPECT_EQ(parse_redis_url("/run/my redis.sock").unix_path, "/run/my redis.sock");
}

TEST(RedisUrl, PasswordsAreHiddenFromTheProcessCommandLine) {
  std::vector<std::string> args = {"greyhound-master", "--redis", "redis://:s3cret@db:6379/0", "--job",
                                   "j", "--redis=redis://u:p@w@h/1", "plain"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_TRUE(hide_redis_passwords(static_cast<int>(argv.size()), argv.data()));
  EXPECT_STREQ(argv[2], "redis://*******@db:6379/0");
  EXPECT_STREQ(argv[5], "--redis=redis://*****@h/1");
  EXPECT_STREQ(argv[6], "plain");
  EXPECT_EQ(std::strlen(argv[2]), std::strlen("redis://:s3cret@db:6379/0"));  // in place: same length
  std::vector<std::string> spaced = {"x", "--redis", "redis://:pass word@db/0"};
  std::vector<char*> sv;
  for (auto& a : spaced) sv.push_back(a.data());
  EXPECT_TRUE(hide_redis_passwords(static_cast<int>(sv.size()), sv.data()));
  EXPECT_STREQ(sv[2], "redis://**********@db/0");
  std::vector<std::string> clean = {"x", "--redis", "redis://db:6379/0"};
  std::vector<char*> cv;
  for (auto& a : clean) cv.push_back(a.data());
  EXPECT_FALSE(hide_redis_passwords(static_cast<int>(cv.size()), cv.data()));
  EXPECT_STREQ(cv[2], "redis://db:6379/0");
}

}  // namespace
}  // namespace greyhound
