// A test with a private redis-server (temp dir, free port), a client on it and the job store of job `job_`
// ("job1" unless a derived fixture's constructor says otherwise); everything is stopped after the test, and
// removed unless it failed (its files then stay for a look).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/redis_client.h"
#include "sim/redis_server.h"
#include "store/job_store.h"

namespace greyhound::test_support {

class StoreFixture : public ::testing::Test {
 protected:
  // TP 1 x DP 2 x PP 2 on two nodes of two GPUs, 4 and 4 micro-batches, S2 advertised: the tests' usual job.
  static JobLayout two_node_layout() {
    JobLayout l;
    l.tp = 1;
    l.dp = 2;
    l.pp = 2;
    l.world = 4;
    l.microbatches = {4, 4};
    l.initial_microbatches = {4, 4};
    l.capabilities = {"S2"};
    l.gpus_per_node = 2;
    return l;
  }
  void SetUp() override {
    char tmpl[] = "/tmp/gh-store-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::string err;
    server_ = sim::RedisServer::start({dir_, 0, ""}, &err);
    ASSERT_TRUE(server_) << err;
    RedisClient::Options o;
    o.endpoint = parse_redis_url(server_->url());
    o.command_timeout = std::chrono::milliseconds(2000);
    redis_ = std::make_unique<RedisClient>(o);
    store_ = std::make_unique<store::JobStore>(*redis_, job_);
  }
  void TearDown() override {
    store_.reset();
    redis_.reset();
    server_.reset();
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  // Plants a raw value, as a hostile or broken writer would.
  void raw(const std::vector<std::string>& argv) {
    auto r = redis_->command(argv);
    ASSERT_TRUE(r && !r->is_error()) << argv[0];
  }

  std::string job_ = "job1";
  std::string dir_;
  std::unique_ptr<sim::RedisServer> server_;
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<store::JobStore> store_;
};

}  // namespace greyhound::test_support
