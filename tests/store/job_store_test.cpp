// The job store against a real redis-server started here (private port, temp dir): every message round-trips
// through its key or stream, and a hostile value in any key is a malformed entry, never a crash.
#include "store/job_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "../support/store_fixture.h"
#include "common/record_json.h"
#include "store/job_status.h"
#include "store/keys.h"

namespace greyhound::store {
namespace {

using JobStoreTest = greyhound::test_support::StoreFixture;

// 100k levels of nesting in 200 kB: well under the 1 MiB cap, deep enough to overflow a recursive copy.
std::string deep() { return std::string(100000, '[') + std::string(100000, ']'); }

TEST_F(JobStoreTest, EventsAppendReadAndSkipMalformedEntries) {
  auto last = store_->last_event_id();
  ASSERT_TRUE(last) << last.error();
  EXPECT_EQ(*last, "0-0");
  Event e;
  e.type = event_type::kProfile;
  e.t_s = 3.5;
  e.rank = 2;
  ProfileReport p;
  p.request = "profile-1-1.x";
  p.window_s = 3;
  p.iterations = 7;
  p.iter_ms = 431.5;
  p.comm_share = 0.25;
  p.timings = 40;
  p.groups[0xabcdefull] = {0.125, 16.5};
  e.detail = to_json(p);
  ASSERT_TRUE(store_->append_event(e));
  raw({"XADD", keys::events("job1"), "*", "json", "{\"type\":\"profile\",\"t_s\":1,\"detail\":" + deep() + "}"});
  raw({"XADD", keys::events("job1"), "*", "other", "x"});
  Event m;
  m.type = event_type::kBaseline;
  m.t_s = 4;
  m.source = "master";
  m.detail = to_json(BaselineReport{"baseline-0-1.x", 8, 6, 453.0});
  ASSERT_TRUE(store_->append_event(m));

  auto r = store_->read_events("0-0", 10);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 4u);
  ASSERT_TRUE((*r)[0].value) << (*r)[0].error;
  std::string err;
  auto back = parse_profile_report((*r)[0].value->detail, &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->request, "profile-1-1.x");
  EXPECT_EQ(back->iterations, 7);
  EXPECT_DOUBLE_EQ(back->iter_ms, 431.5);
  EXPECT_DOUBLE_EQ(back->groups.at(0xabcdefull).share, 0.125);
  EXPECT_DOUBLE_EQ(back->groups.at(0xabcdefull).calls_per_s, 16.5);
  EXPECT_FALSE((*r)[1].value);
  EXPECT_EQ((*r)[1].error, "nested deeper than 16 levels");
  EXPECT_FALSE((*r)[2].value);
  EXPECT_NE((*r)[2].error.find("not valid JSON"), std::string::npos);
  ASSERT_TRUE((*r)[3].value);
  auto b = parse_baseline_report((*r)[3].value->detail, &err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(b->ranks_profiled, 8);
  EXPECT_EQ(b->groups, 6);

  // Reading on from a cursor; a cursor that is no stream id is refused before Redis sees it.
  auto rest = store_->read_events((*r)[1].id, 10);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->size(), 2u);
  auto none = store_->read_events((*r)[3].id, 10);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(*store_->last_event_id(), (*r)[3].id);
  auto bad = store_->read_events("$ COUNT", 1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code(), Errc::kInvalid);
}

// A reader behind the stream learns that it was trimmed past its cursor.
TEST_F(JobStoreTest, TheStreamsOldestEntryTellsALaggingReaderItWasTrimmedPast) {
  auto none = store_->first_event_id();
  ASSERT_TRUE(none) << none.error();
  EXPECT_EQ(*none, "0-0");
  Event e;
  e.type = event_type::kAgentStart;
  e.t_s = 1;
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(store_->append_event(e));
  auto all = store_->read_events("0-0", 10);
  ASSERT_TRUE(all && all->size() == 6u);
  auto first = store_->first_event_id();
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(*first, (*all)[0].id);
  raw({"XTRIM", keys::events("job1"), "MAXLEN", "2"});  // as MAXLEN ~ does once the stream is long
  first = store_->first_event_id();
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(*first, (*all)[4].id);
  // Entries are 0..5 here. A reader at entry 1 was trimmed past (2 and 3 lost); so, to the stream's knowledge,
  // was one at entry 3 (nothing lost: 4 is its next; hence "may have lost"); one at entry 4 was not.
  EXPECT_GT(compare_stream_ids(*first, (*all)[1].id), 0);
  EXPECT_GT(compare_stream_ids(*first, (*all)[3].id), 0);
  EXPECT_LE(compare_stream_ids(*first, (*all)[4].id), 0);
  raw({"DEL", keys::events("job1")});
  raw({"SET", keys::events("job1"), "not a stream"});
  EXPECT_FALSE(store_->first_event_id());
}

TEST_F(JobStoreTest, CommandsPerNode) {
  EXPECT_EQ(*store_->last_command_id(1), "0-0");
  Command c;
  c.cmd = "profile";
  c.id = "profile-1-1.x";
  c.duration_s = 2.5;
  ASSERT_TRUE(store_->send_command(1, c));
  raw({"XADD", keys::commands("job1", 1), "*", "json", "{\"cmd\":\"format-disk\",\"id\":\"x\"}"});
  auto r = store_->read_commands(1, "0-0", 16);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 2u);
  ASSERT_TRUE((*r)[0].value);
  EXPECT_EQ((*r)[0].value->id, "profile-1-1.x");
  EXPECT_DOUBLE_EQ((*r)[0].value->duration_s, 2.5);
  EXPECT_EQ((*r)[1].error, "cmd: unknown command 'format-disk'");
  EXPECT_EQ(*store_->last_command_id(1), (*r)[1].id);
  EXPECT_TRUE(store_->read_commands(0, "0-0", 16)->empty());
}

TEST_F(JobStoreTest, RegistryRoundTrip) {
  AgentUpdate u = store_->agent_update();
  u.register_job();
  RankRegistration reg;
  reg.rank = 5;
  reg.local_rank = 1;
  reg.node = 1;
  reg.host = "gpu17";
  reg.pid = 4242;
  reg.ring = "/dev/shm/greyhound.job1.5";
  u.rank(reg);
  u.group_member(0x1234, 2, 1, 5, "CommSplit", 1);
  u.group_member(0x1234, 2, 0, 4, "CommSplit", 0);
  u.group_ops(0x1234, 5, {{"AllReduce:8192", 12}});
  NcclRingDump dump;
  dump.group_rank = 0;
  dump.segment = {0};
  dump.crosses_nodes = true;
  dump.channels = 2;
  dump.tree = NcclTreeChain{validate::NcclTreePattern::kTree, {0}, true};
  u.group_nccl_ring(0x1234, dump);
  IterationUpdate it;
  it.rank = 5;
  it.index = 41;
  it.t_s = 18.25;
  it.iter_ms = 287.5;
  it.period = 33;
  u.iteration(it);
  AgentHeartbeat hb;
  hb.node = 1;
  hb.host = "gpu17";
  hb.pid = 77;
  hb.t_unix_ms = 1000;
  hb.ranks = {4, 5};
  u.heartbeat(hb);
  ASSERT_TRUE(store_->publish(u));

  EXPECT_EQ(*JobStore::jobs(*redis_), std::vector<std::string>{"job1"});
  EXPECT_EQ(*store_->ranks(), std::vector<int>{5});
  EXPECT_EQ(*store_->agents(), std::vector<int>{1});
  auto r = store_->rank(5);
  ASSERT_TRUE(r && *r) << r.error();
  EXPECT_EQ((*r)->host, "gpu17");
  EXPECT_EQ((*r)->ring, reg.ring);
  auto i = store_->iteration(5);
  ASSERT_TRUE(i && *i);
  EXPECT_EQ((*i)->index, 41);
  EXPECT_DOUBLE_EQ((*i)->iter_ms, 287.5);
  auto h = store_->heartbeat(1);
  ASSERT_TRUE(h && *h);
  EXPECT_EQ((*h)->ranks, (std::vector<int>{4, 5}));
  auto absent = store_->heartbeat(3);
  ASSERT_TRUE(absent);
  EXPECT_FALSE(*absent);
  // TTLs: the liveness keys expire.
  auto ttl = redis_->command({"TTL", keys::agent("job1", 1)});
  ASSERT_TRUE(ttl);
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, keys::kHeartbeatTtl.count());

  auto g = store_->groups();
  ASSERT_TRUE(g) << g.error();
  ASSERT_EQ(g->size(), 1u);
  ASSERT_TRUE((*g)[0].value) << (*g)[0].error;
  const GroupRecord& rec = *(*g)[0].value;
  EXPECT_EQ(rec.id, 0x1234u);
  EXPECT_TRUE(rec.complete());
  EXPECT_EQ(rec.members, (std::map<int, int>{{0, 4}, {1, 5}}));
  EXPECT_EQ(rec.nodes, (std::map<int, int>{{0, 0}, {1, 1}}));
  EXPECT_EQ(rec.created_by, "CommSplit");
  EXPECT_EQ(rec.ops.at(5).at("AllReduce:8192"), 12u);
  ASSERT_TRUE(rec.nccl_ring);
  EXPECT_EQ(rec.nccl_ring->group_rank, 0);
  EXPECT_EQ(rec.nccl_ring->segment, (std::vector<int>{0}));
  EXPECT_TRUE(rec.nccl_ring->crosses_nodes);
  EXPECT_EQ(rec.nccl_ring->channels, 2);
  EXPECT_EQ(rec.nccl_ring->tree, dump.tree);
  EXPECT_EQ((*g)[0].error, "");
}

TEST_F(JobStoreTest, MasterCommitIsOneTransaction) {
  MasterCommit c;
  c.state.cursor = "5-0";
  c.state.state = Phase::kSlow;
  c.state.open_incident = 1;
  c.state.incidents_total = 1;
  Incident inc;
  inc.id = 1;
  inc.onset_t_s = 10;
  inc.detected_t_s = 12;
  inc.before_ms = 300;
  inc.after_ms = 400;
  inc.severity = 4.0 / 3;
  inc.ranks = {3};
  c.incidents.push_back(inc);
  Event e;
  e.type = event_type::kIncidentOpen;
  e.t_s = 12;
  e.source = "master";
  e.incident = 1;
  IncidentDetail d;
  d.ranks = {3};
  d.onset_t_s = 10;
  d.detected_t_s = 12;
  d.state = Phase::kSlow;
  e.detail = to_json(d);
  c.events.push_back(e);
  ASSERT_TRUE(store_->commit(c));

  auto st = store_->master_state();
  ASSERT_TRUE(st && *st) << st.error();
  EXPECT_EQ((*st)->cursor, "5-0");
  EXPECT_EQ((*st)->open_incident, 1);
  auto i = store_->incident(1);
  ASSERT_TRUE(i && *i);
  EXPECT_EQ((*i)->ranks, std::vector<int>{3});
  EXPECT_EQ(*store_->recent_incidents(10), std::vector<std::int64_t>{1});
  auto ev = store_->read_events("0-0", 10);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 1u);
  std::string err;
  auto back = parse_incident_detail((*ev)[0].value->detail, &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->ranks, std::vector<int>{3});
  EXPECT_EQ(back->state, Phase::kSlow);
  EXPECT_EQ(*JobStore::jobs(*redis_), std::vector<std::string>{"job1"});
}

TEST_F(JobStoreTest, PlanChannelLayoutAcksAndRestart) {
  auto none = store_->latest_plan();
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  Plan p;
  p.epoch = 3;
  p.strategy = Strategy::kS2;
  p.incident = 1;
  p.microbatches = {10, 6};
  p.predicted_iteration_s = 0.5;
  ASSERT_TRUE(store_->publish_plan(p));
  auto latest = store_->latest_plan();
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->epoch, 3);
  EXPECT_EQ((*latest)->microbatches, (std::vector<int>{10, 6}));
  auto copy = store_->plan(3);
  ASSERT_TRUE(copy && *copy);
  EXPECT_EQ(to_json(**copy), to_json(**latest));

  PlanAck a;
  a.rank = 2;
  a.epoch = 3;
  a.iteration = 40;
  a.status = AckStatus::kRejected;
  a.detail = "micro-batch vector does not fit this job";
  ASSERT_TRUE(store_->write_ack(a));
  raw({"HSET", keys::plan_acks("job1"), "7", to_json(a).dump()});  // stored under another rank
  auto acks = store_->plan_acks();
  ASSERT_TRUE(acks);
  ASSERT_EQ(acks->size(), 2u);
  int good = 0;
  for (const auto& e : *acks) {
    if (e.value) {
      ++good;
      EXPECT_EQ(e.value->detail, a.detail);
    } else {
      EXPECT_EQ(e.error, "rank: differs from the field it is stored under");
    }
  }
  EXPECT_EQ(good, 1);

  JobLayout l;
  l.tp = 2;
  l.dp = 2;
  l.pp = 2;
  l.world = 8;
  l.microbatches = {8, 8};
  l.capabilities = {"S2"};
  ASSERT_TRUE(store_->write_layout(l));
  auto lb = store_->layout();
  ASSERT_TRUE(lb && *lb);
  EXPECT_EQ((*lb)->initial_microbatches, (std::vector<int>{8, 8}));

  RestartRequest rr;
  rr.rank = 0;
  rr.epoch = 4;
  rr.reason = "S4 plan";
  rr.exclude_nodes = {1};
  ASSERT_TRUE(store_->request_restart(rr));
  auto rb = store_->restart_request();
  ASSERT_TRUE(rb && *rb);
  EXPECT_EQ((*rb)->exclude_nodes, std::vector<int>{1});
}

// Redis Cluster's slot of a key (CRC16/XMODEM of the hash tag, or of the whole key without one, mod 16384).
int key_slot(const std::string& key) {
  std::string part = key;
  if (const auto open = key.find('{'); open != std::string::npos) {
    if (const auto close = key.find('}', open + 1); close != std::string::npos && close > open + 1) {
      part = key.substr(open + 1, close - open - 1);
    }
  }
  std::uint16_t crc = 0;
  for (unsigned char c : part) {
    crc ^= static_cast<std::uint16_t>(c << 8);
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc % 16384;
}

// Every key of a job is hash-tagged by the job, so on a Redis Cluster the job lives on one slot and its
// transactions never cross slots; the registry of jobs is the one key outside it.
TEST_F(JobStoreTest, EveryKeyOfAJobIsInTheJobsHashSlot) {
  EXPECT_EQ(key_slot("123456789"), 0x31C3 % 16384);  // CRC16/XMODEM's check value
  MasterCommit c;
  Incident inc;
  inc.id = 1;
  inc.ranks = {0};
  c.incidents.push_back(inc);
  Event e;
  e.type = event_type::kIncidentOpen;
  e.source = "master";
  c.events.push_back(e);
  ASSERT_TRUE(store_->commit(c));
  Plan p;
  p.epoch = 1;
  p.strategy = Strategy::kS2;
  p.microbatches = {2, 2};
  ASSERT_TRUE(store_->publish_plan(p));
  Command cmd;
  cmd.cmd = "profile";
  ASSERT_TRUE(store_->send_command(0, cmd));
  auto all = redis_->command({"KEYS", "*"});
  ASSERT_TRUE(all && all->type == RedisReply::Type::kArray);
  ASSERT_GE(all->elements.size(), 6u);
  for (const auto& k : all->elements) {
    if (k.str == keys::jobs()) continue;
    EXPECT_EQ(k.str.rfind("gh:v1:{job1}:", 0), 0u) << k.str;
    EXPECT_EQ(key_slot(k.str), key_slot("job1")) << k.str;
  }
  EXPECT_EQ(*JobStore::jobs(*redis_), std::vector<std::string>{"job1"});
}

// The masters' lease (--ha): one holder at a time per scope, epochs that only grow, given up only by its
// holder; two processes with the same id are two holders (the token's nonce).
TEST_F(JobStoreTest, TheMastersLeaseHasOneHolderAndEpochsThatOnlyGrow) {
  const std::string scope = "job:job1";
  EXPECT_FALSE(*JobStore::lease_holder(*redis_, scope));
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, scope, "a n1", 5000), 1);
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, scope, "b n2", 5000), 0);  // held by a
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, scope, "a n3", 5000), 0);  // same id, another process
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, scope, "a n1", 5000), 1);  // a renews, same epoch
  EXPECT_EQ(**JobStore::lease_holder(*redis_, scope), "1 a n1");
  EXPECT_TRUE(*JobStore::renew_lease(*redis_, scope, "a n1", 1, 5000));
  EXPECT_FALSE(*JobStore::renew_lease(*redis_, scope, "a n3", 1, 5000));
  EXPECT_FALSE(*JobStore::renew_lease(*redis_, scope, "a n1", 2, 5000));
  // Another scope (masters serving another job) has a lease of its own, from the same counter.
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, "job:other", "c n4", 5000), 2);
  ASSERT_TRUE(JobStore::release_lease(*redis_, scope, "b n2", 1));  // not b's: nothing happens
  EXPECT_EQ(**JobStore::lease_holder(*redis_, scope), "1 a n1");
  ASSERT_TRUE(JobStore::release_lease(*redis_, scope, "a n1", 1));
  EXPECT_FALSE(*JobStore::lease_holder(*redis_, scope));
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, scope, "b n2", 300), 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // lapses
  EXPECT_FALSE(*JobStore::renew_lease(*redis_, scope, "b n2", 3, 300));
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, scope, "a n1", 5000), 4);
  // A counter that fell behind (deleted) is raised again, never lowered.
  raw({"DEL", keys::master_epoch()});
  ASSERT_TRUE(JobStore::raise_lease_epoch(*redis_, 9));
  ASSERT_TRUE(JobStore::raise_lease_epoch(*redis_, 5));
  EXPECT_EQ(*JobStore::acquire_lease(*redis_, "job:third", "d n5", 5000), 10);
}

// An epoch is published once: a second plan under it changes nothing (publish_plan answers false), fenced or
// not. The job's own revert is written only while no plan lease is held and its epoch is free.
TEST_F(JobStoreTest, AnEpochIsPublishedOnceAndTheJobsRevertOnlyWithoutALease) {
  Plan p;
  p.epoch = 1;
  p.strategy = Strategy::kS2;
  p.microbatches = {6, 2};
  auto first = store_->publish_plan(p);
  ASSERT_TRUE(first);
  EXPECT_TRUE(*first);
  Plan other = p;
  other.microbatches = {2, 6};
  auto again = store_->publish_plan(other);
  ASSERT_TRUE(again) << again.error();
  EXPECT_FALSE(*again);
  EXPECT_EQ((*store_->latest_plan())->microbatches, (std::vector<int>{6, 2}));
  EXPECT_EQ((*store_->plan(1))->microbatches, (std::vector<int>{6, 2}));

  JobStore leader(*redis_, job_);  // the same under a fence (the script inside MULTI/EXEC)
  ASSERT_EQ(*leader.take_job(3), 0);
  auto fenced = leader.publish_plan(other);
  ASSERT_TRUE(fenced) << fenced.error();
  EXPECT_FALSE(*fenced);
  other.epoch = 2;
  fenced = leader.publish_plan(other);
  ASSERT_TRUE(fenced) << fenced.error();
  EXPECT_TRUE(*fenced);
  EXPECT_EQ((*store_->latest_plan())->epoch, 2);

  // The lease: held while its key lives.
  EXPECT_FALSE(*store_->plan_lease_held());
  ASSERT_TRUE(leader.hold_plan_lease("run-a", 300));
  EXPECT_TRUE(*store_->plan_lease_held());
  Plan revert;
  revert.epoch = 3;
  revert.action = PlanAction::kRevert;
  revert.microbatches = {4, 4};
  auto blocked = store_->publish_plan_unleased(revert);
  ASSERT_TRUE(blocked) << blocked.error();
  EXPECT_FALSE(*blocked);  // a master holds the lease
  EXPECT_EQ((*store_->latest_plan())->epoch, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_FALSE(*store_->plan_lease_held());
  revert.epoch = 2;
  blocked = store_->publish_plan_unleased(revert);
  ASSERT_TRUE(blocked);
  EXPECT_FALSE(*blocked);  // the epoch is taken
  revert.epoch = 3;
  auto written = store_->publish_plan_unleased(revert);
  ASSERT_TRUE(written) << written.error();
  EXPECT_TRUE(*written);
  auto latest = store_->latest_plan();
  ASSERT_TRUE(latest && *latest);
  EXPECT_EQ((*latest)->epoch, 3);
  EXPECT_EQ((*latest)->action, PlanAction::kRevert);
  EXPECT_EQ(to_json(**store_->plan(3)), to_json(**latest));
  // A returning master continues after it: its own epoch 3 is refused.
  other.epoch = 3;
  fenced = leader.publish_plan(other);
  ASSERT_TRUE(fenced);
  EXPECT_FALSE(*fenced);
  EXPECT_EQ((*store_->latest_plan())->action, PlanAction::kRevert);
}

// A master of an older epoch writes nothing once a newer one leads the job: commits, plans, commands, events
// and answers are refused and change nothing. A leader whose job's epoch key vanished raises it again.
TEST_F(JobStoreTest, AStaleLeadersWritesAreRefusedAndChangeNothing) {
  JobStore old_leader(*redis_, job_), new_leader(*redis_, job_);
  ASSERT_EQ(*old_leader.take_job(1), 0);
  MasterCommit c;
  c.state.cursor = "1-0";
  ASSERT_TRUE(old_leader.commit(c));
  ASSERT_EQ(*new_leader.take_job(2), 0);
  EXPECT_EQ(*old_leader.take_job(1), 2);  // an epoch is never lowered: the newer one is named

  c.state.cursor = "9-0";
  const Status stale = old_leader.commit(c);
  EXPECT_EQ(stale.code(), Errc::kRefused);
  EXPECT_NE(stale.error().find("fenced"), std::string::npos) << stale.error();
  Plan p;
  p.epoch = 1;
  p.strategy = Strategy::kS2;
  p.microbatches = {2, 2};
  EXPECT_FALSE(old_leader.publish_plan(p));
  Command cmd;
  cmd.cmd = "ping";
  EXPECT_FALSE(old_leader.send_command(0, cmd));
  Event e;
  e.type = event_type::kLeader;
  e.source = "master";
  e.detail = to_json(LeaderDetail{"m0", 1});
  EXPECT_FALSE(old_leader.append_event(e));
  OperatorPlanReport answer;
  answer.id = "op-1";
  answer.state = "refused";
  EXPECT_FALSE(old_leader.write_operator_plan_result(answer));
  EXPECT_EQ((*store_->master_state())->cursor, "1-0");
  EXPECT_FALSE(*store_->latest_plan());
  EXPECT_TRUE(store_->read_commands(0, "0-0", 10)->empty());
  EXPECT_TRUE(store_->read_events("0-0", 10)->empty());
  EXPECT_FALSE(*store_->operator_plan_result());

  c.state.cursor = "12-0";
  ASSERT_TRUE(new_leader.commit(c));
  EXPECT_EQ((*store_->master_state())->cursor, "12-0");
  ASSERT_TRUE(new_leader.publish_plan(p));

  // The job's epoch key evicted or deleted: the leader raises it again and writes; the stale one still cannot.
  raw({"DEL", keys::leader(job_)});
  c.state.cursor = "13-0";
  ASSERT_TRUE(new_leader.commit(c));
  EXPECT_EQ((*store_->master_state())->cursor, "13-0");
  EXPECT_FALSE(old_leader.commit(c));
  // A wrongly typed epoch key fails the write, and leaves no WATCH behind for the next one on the connection.
  raw({"DEL", keys::leader(job_)});
  raw({"HSET", keys::leader(job_), "x", "1"});
  EXPECT_FALSE(new_leader.commit(c));
  JobStore unfenced(*redis_, "job2");
  EXPECT_TRUE(unfenced.commit(c));
}

// A job's ranks set planted with 200,000 members: the status (what /metrics and /status build on the master's
// loop) reads the job's own ranks, below its layout's world, and counts the rest without reading them (it
// read two keys per member, one after the other: 23 s on this machine); without a layout, the first
// kMaxStatusRanks, pipelined.
TEST_F(JobStoreTest, AStatusReadsOnlyTheJobsRanksWhateverTheRanksSetHolds) {
  ASSERT_TRUE(store_->write_layout(two_node_layout()));
  for (int at = 0; at < 200000; at += 10000) {
    std::vector<std::string> cmd = {"SADD", keys::ranks(job_)};
    for (int r = at; r < at + 10000; ++r) cmd.push_back(std::to_string(r));
    raw(cmd);
  }
  RankRegistration reg;
  reg.rank = 2;
  reg.node = 1;
  reg.host = "n1";
  reg.pid = 7;
  raw({"SET", keys::rank(job_, 2), to_json(reg).dump()});
  auto s = job_status(*store_, unix_ms_now());
  ASSERT_TRUE(s) << s.error();
  ASSERT_EQ((*s)["ranks"].size(), 4u);
  EXPECT_EQ((*s)["ranks_ignored"], 199996);
  EXPECT_EQ((*s)["ranks"][2]["host"], "n1");
  raw({"DEL", keys::layout(job_)});
  s = job_status(*store_, unix_ms_now());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ((*s)["ranks"].size(), static_cast<std::size_t>(kMaxStatusRanks));
  EXPECT_EQ((*s)["ranks_ignored"], 200000 - kMaxStatusRanks);
  EXPECT_EQ((*s)["ranks"][2]["host"], "n1");
}

TEST_F(JobStoreTest, HostileValuesInEveryKeyAreMalformedNotFatal) {
  const std::string d = deep();
  raw({"SET", keys::master("job1"), d});
  raw({"SET", keys::incident("job1", 1), d});
  raw({"SET", keys::layout("job1"), d});
  raw({"SET", keys::plan("job1"), "{\"epoch\":1,\"strategy\":\"S2\",\"placement\":" + d + "}"});
  raw({"SET", keys::rank("job1", 0), d});
  raw({"SET", keys::iter("job1", 0), d});
  raw({"SET", keys::agent("job1", 0), d});
  raw({"SET", keys::restart("job1"), d});
  raw({"HSET", keys::plan_acks("job1"), "0", d});
  raw({"SADD", keys::groups("job1"), "00000000000000ab", "not-a-group"});
  raw({"HSET", keys::group("job1", "00000000000000ab"), "size", "2", "member:0", "0", "member:1", "1", "created_by", d,
       "ops:0", d});
  raw({"SADD", keys::ranks("job1"), "x", "-1", "99999999999", "3"});
  raw({"SADD", keys::jobs(), "job1", "bad:job", "a b"});
  raw({"XADD", keys::commands("job1", 0), "*", "json", d});

  EXPECT_EQ(store_->master_state().code(), Errc::kInvalid);
  EXPECT_EQ(store_->incident(1).code(), Errc::kInvalid);
  EXPECT_EQ(store_->layout().code(), Errc::kInvalid);
  EXPECT_EQ(store_->latest_plan().error(), keys::plan("job1") + ": nested deeper than 16 levels");
  EXPECT_EQ(store_->rank(0).code(), Errc::kInvalid);
  EXPECT_EQ(store_->iteration(0).code(), Errc::kInvalid);
  EXPECT_EQ(store_->heartbeat(0).code(), Errc::kInvalid);
  EXPECT_EQ(store_->restart_request().code(), Errc::kInvalid);
  auto acks = store_->plan_acks();
  ASSERT_TRUE(acks);
  ASSERT_EQ(acks->size(), 1u);
  EXPECT_FALSE((*acks)[0].value);
  auto g = store_->groups();
  ASSERT_TRUE(g) << g.error();
  ASSERT_EQ(g->size(), 2u);
  ASSERT_TRUE((*g)[0].value);  // members are fine: usable, with what was wrong noted
  EXPECT_TRUE((*g)[0].value->complete());
  EXPECT_TRUE((*g)[0].value->ops.empty());
  EXPECT_EQ((*g)[0].error, "created_by: not a JSON string");
  EXPECT_FALSE((*g)[1].value);
  EXPECT_EQ(*store_->ranks(), std::vector<int>{3});
  EXPECT_EQ(*JobStore::jobs(*redis_), std::vector<std::string>{"job1"});
  auto c = store_->read_commands(0, "0-0", 4);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->size(), 1u);
  EXPECT_FALSE((*c)[0].value);
  // Values far over the cap are cut by the server before they cross the connection and read as too large.
  const std::string huge(3 << 20, '{');
  raw({"SET", keys::iter("job1", 1), huge});
  raw({"HSET", keys::plan_acks("job1"), "1", huge});
  raw({"XADD", keys::events("job1"), "*", "json", huge});
  raw({"SADD", keys::agents("job1"), huge, "2"});
  EXPECT_NE(store_->iteration(1).error().find("too large"), std::string::npos) << store_->iteration(1).error();
  acks = store_->plan_acks();
  ASSERT_TRUE(acks);
  ASSERT_EQ(acks->size(), 2u);
  for (const auto& e : *acks) EXPECT_NE(e.error.find(e.id == "1" ? "too large" : "nested"), std::string::npos);
  auto ev = store_->read_events("0-0", 10);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_NE((*ev)[0].error.find("too large"), std::string::npos) << (*ev)[0].error;
  EXPECT_EQ(*store_->agents(), std::vector<int>{2});
  // A key of the wrong type is a refusal of that read, not of the store.
  raw({"DEL", keys::layout("job1")});
  raw({"LPUSH", keys::layout("job1"), "x"});
  EXPECT_EQ(store_->layout().code(), Errc::kRefused);
}

TEST_F(JobStoreTest, AnAbsentServerIsUnavailable) {
  server_->stop();
  auto r = store_->master_state();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), Errc::kUnavailable);
  EXPECT_EQ(store_->append_event(Event{}).code(), Errc::kUnavailable);
  EXPECT_EQ(store_->commit(MasterCommit{}).code(), Errc::kUnavailable);
}

}  // namespace
}  // namespace greyhound::store
