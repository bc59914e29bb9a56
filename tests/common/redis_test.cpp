// The Redis client wrapper against a real redis-server started here (private port, temp dir).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "common/redis_client.h"
#include "sim/redis_server.h"

namespace greyhound {
namespace {

class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gh-redis-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    server_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  void start(const std::string& password = "") {
    std::string err;
    server_ = sim::RedisServer::start({dir_, 0, password}, &err);
    ASSERT_TRUE(server_) << err;
  }
  RedisClient::Options opts(const std::string& url) {
    RedisClient::Options o;
    o.endpoint = parse_redis_url(url);
    o.connect_timeout = std::chrono::milliseconds(200);
    o.command_timeout = std::chrono::milliseconds(500);
    o.backoff_min = std::chrono::milliseconds(20);
    o.backoff_max = std::chrono::milliseconds(100);
    return o;
  }
  std::string dir_;
  std::unique_ptr<sim::RedisServer> server_;
};

TEST(RedisUrl, ParsesEveryForm) {
  auto e = parse_redis_url("redis://:s3cret@db.example:6380/2");
  EXPECT_EQ(e.host, "db.example");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.password, "s3cret");
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(e.describe(), "db.example:6380/2");  // never the password
  e = parse_redis_url("redis://alice:pw@h");
  EXPECT_EQ(e.user, "alice");
  EXPECT_EQ(e.port, 6379);
  e = parse_redis_url("unix:///run/redis.sock?db=3");
  EXPECT_EQ(e.unix_path, "/run/redis.sock");
  EXPECT_EQ(e.db, 3);
  EXPECT_EQ(parse_redis_url("/tmp/r.sock").unix_path, "/tmp/r.sock");
  EXPECT_EQ(parse_redis_url("").host, "127.0.0.1");
  EXPECT_THROW(parse_redis_url("http://x"), std::invalid_argument);
  EXPECT_THROW(parse_redis_url("redis://h:99999/0"), std::invalid_argument);
  EXPECT_THROW(parse_redis_url("redis://h:1/x"), std::invalid_argument);
}

TEST_F(RedisTest, CommandsPipelinesAndErrors) {
  start();
  RedisClient c(opts(server_->url()));
  auto r = c.command({"SET", "k", std::string("a\0b", 3)});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, RedisReply::Type::kStatus);
  r = c.command({"GET", "k"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->str, std::string("a\0b", 3));  // binary safe
  r = c.command({"GET", "missing"});
  EXPECT_TRUE(r && r->is_nil());
  r = c.command({"NOSUCHCOMMAND"});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->is_error());
  EXPECT_TRUE(c.connected());  // a server error is not a connection problem
  auto p = c.pipeline({{"MULTI"}, {"INCR", "n"}, {"INCR", "n"}, {"EXEC"}});
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), 4u);
  ASSERT_EQ(p->back().elements.size(), 2u);
  EXPECT_EQ(p->back().elements[1].integer, 2);
}

TEST_F(RedisTest, AbsentServerFailsFastThenReconnectsWithBackoff) {
  const int port = sim::pick_free_port();
  RedisClient c(opts("redis://127.0.0.1:" + std::to_string(port) + "/0"));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.command({"PING"}));
  EXPECT_NE(c.last_error().find("cannot connect"), std::string::npos) << c.last_error();
  EXPECT_FALSE(c.ensure_connected());  // within the backoff: no new attempt
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  std::string err;
  server_ = sim::RedisServer::start({dir_, port, ""}, &err);
  ASSERT_TRUE(server_) << err;
  bool ok = false;
  for (int i = 0; i < 100 && !ok; ++i) {
    ok = c.command({"PING"}).has_value();
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ok) << c.last_error();
}

TEST_F(RedisTest, SurvivesServerRestartAndKeepsAcknowledgedWrites) {
  start();
  RedisClient c(opts(server_->url()));
  auto id = c.command({"XADD", "s", "*", "json", "{}"});
  ASSERT_TRUE(id && id->type == RedisReply::Type::kString);
  server_->kill_hard();
  EXPECT_FALSE(c.command({"PING"}));
  std::string err;
  ASSERT_TRUE(server_->restart(&err)) << err;
  std::optional<RedisReply> r;
  for (int i = 0; i < 100 && !r; ++i) {
    r = c.command({"XRANGE", "s", "-", "+"});
    if (!r) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(r);
  ASSERT_EQ(r->elements.size(), 1u);  // fsync'd before it was acknowledged
  EXPECT_EQ(r->elements[0].elements[0].str, id->str);
  EXPECT_GE(c.reconnects(), 1u);
}

TEST_F(RedisTest, AuthWithPasswordFromUrlOrFile) {
  start("pa55");
  RedisClient wrong(opts("redis://127.0.0.1:" + std::to_string(server_->port()) + "/0"));
  auto r = wrong.command({"SET", "a", "1"});
  EXPECT_FALSE(r);  // refused at the connection, not as a reply every reader would take for a malformed value
  EXPECT_NE(wrong.last_error().find("refused: NOAUTH"), std::string::npos) << wrong.last_error();
  EXPECT_NE(wrong.last_error().find("GREYHOUND_REDIS_PASSWORD_FILE"), std::string::npos) << wrong.last_error();
  RedisClient right(opts(server_->url()));
  r = right.command({"SET", "a", "1"});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->is_error()) << r->str;

  std::ofstream(dir_ + "/pw") << "pa55\n";
  setenv("GREYHOUND_REDIS", ("redis://127.0.0.1:" + std::to_string(server_->port()) + "/1").c_str(), 1);
  setenv("GREYHOUND_REDIS_PASSWORD_FILE", (dir_ + "/pw").c_str(), 1);
  auto o = opts("");
  o.endpoint = redis_endpoint_from_env();
  // A URL given as a flag (no password in it) takes the password from the file too; one with a password
  // keeps its own.
  const RedisEndpoint flag = redis_endpoint_from_env("redis://127.0.0.1:" + std::to_string(server_->port()) + "/2");
  const RedisEndpoint own = redis_endpoint_from_env("redis://:other@127.0.0.1:" + std::to_string(server_->port()) + "/2");
  unsetenv("GREYHOUND_REDIS");
  unsetenv("GREYHOUND_REDIS_PASSWORD_FILE");
  EXPECT_EQ(o.endpoint.password, "pa55");
  EXPECT_EQ(flag.password, "pa55");
  EXPECT_EQ(flag.db, 2);
  EXPECT_EQ(own.password, "other");
  RedisClient from_file(o);
  r = from_file.command({"GET", "a"});  // database 1: not the key set in database 0
  ASSERT_TRUE(r) << from_file.last_error();
  EXPECT_TRUE(r->is_nil());
}

}  // namespace
}  // namespace greyhound
