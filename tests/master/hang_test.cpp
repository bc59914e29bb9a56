// Hangs from stall reports (daemon/hang.h), and the controller naming them once.
#include "daemon/hang.h"

#include <gtest/gtest.h>

#include "daemon/controller.h"

namespace greyhound::master {
namespace {

RankStall inside(std::uint64_t group, std::uint64_t seq, double since_t_s = 10, const char* op = "AllReduce") {
  RankStall s;
  s.detail.in_call = true;
  s.detail.op = op;
  s.detail.group = group;
  s.detail.group_seq = seq;
  s.detail.since_t_s = since_t_s;
  if (seq > 0) s.detail.last_seq[group] = seq - 1;
  return s;
}

RankStall outside(std::map<std::uint64_t, std::uint64_t> last) {
  RankStall s;
  s.detail.in_call = false;
  s.detail.since_t_s = 9;
  s.detail.last_seq = std::move(last);
  return s;
}

const std::vector<GroupMembers> kGroups = {GroupMembers{0xA, {0, 1, 2, 3}, "dp"}, GroupMembers{0xB, {4, 5, 6, 7}, "dp"},
                                           GroupMembers{0xC, {1, 5}, "pp"}};

TEST(Hang, TheMembersNotInsideTheCallTheOthersWaitInAreMissing) {
  // Ranks 0, 1, 3 wait in call 41 of group A; rank 2 stopped after call 40 and calls nothing.
  std::map<int, RankStall> stalls = {{0, inside(0xA, 41, 10.5)}, {1, inside(0xA, 41, 10.2)}, {3, inside(0xA, 41, 10.7)},
                                     {2, outside({{0xA, 40}})}};
  const auto hangs = find_hangs(stalls, kGroups);
  ASSERT_EQ(hangs.size(), 1u);
  const HangDetail& h = hangs[0];
  EXPECT_EQ(h.group, 0xAu);
  EXPECT_EQ(h.seq, 41u);
  EXPECT_EQ(h.op, "AllReduce");
  EXPECT_EQ(h.waiting, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(h.missing, (std::vector<int>{2}));
  EXPECT_EQ(h.missing_last_seq.at(2), 40);
  EXPECT_DOUBLE_EQ(h.since_t_s, 10.2);
}

TEST(Hang, AMemberWithoutAReportIsMissingOneBlockedInAnotherCallIsNot) {
  // Group B: 4 and 6 wait in call 12; 5 is inside call 11 (behind: it waits there for someone else); 7 sent
  // no report (unknown): 7 is the root.
  std::map<int, RankStall> stalls = {{4, inside(0xB, 12)}, {6, inside(0xB, 12)}, {5, inside(0xB, 11)}};
  const auto hangs = find_hangs(stalls, kGroups);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].missing, (std::vector<int>{7}));
  EXPECT_EQ(hangs[0].missing_last_seq.at(7), -1);
  EXPECT_EQ(hangs[0].missing_last_seq.count(5), 0u);
}

TEST(Hang, AChainOfWaitsIsTracedToTheRankInNoCall) {
  // Rank 5 hangs outside NCCL. Its TP peer 4 waits in group B's collective 9 for it; rank 1, 5's pipeline
  // peer, is blocked in a Send on group C (a send has no collective number: it names no hang of its own but
  // is blocked); ranks 0, 2, 3 wait in group A's collective 20 for 1.
  const std::vector<GroupMembers> groups = {GroupMembers{0xA, {0, 1, 2, 3}, "dp"}, GroupMembers{0xB, {4, 5}, "tp"},
                                            GroupMembers{0xC, {1, 5}, "pp"}};
  std::map<int, RankStall> stalls = {{0, inside(0xA, 20)}, {2, inside(0xA, 20)}, {3, inside(0xA, 20)},
                                     {1, inside(0xC, 0, 10, "Send")}, {4, inside(0xB, 9)},
                                     {5, outside({{0xB, 8}})}};
  const auto hangs = find_hangs(stalls, groups);
  ASSERT_EQ(hangs.size(), 1u);  // the group that waits for 5 directly; not A (it waits for 1, blocked elsewhere)
  EXPECT_EQ(hangs[0].group, 0xBu);
  EXPECT_EQ(hangs[0].missing, (std::vector<int>{5}));
  EXPECT_EQ(hangs[0].waiting, (std::vector<int>{4}));
  EXPECT_EQ(hangs[0].missing_last_seq.at(5), 8);
}

TEST(Hang, ACycleOfWaitsIsReportedWholeWhenNoRankIsOutsideNccl) {
  // 1 waits in A's call 5 for 0, which waits in C's call 2 for... 1 (calls issued in different orders).
  const std::vector<GroupMembers> groups = {GroupMembers{0xA, {0, 1}, "x"}, GroupMembers{0xC, {0, 1}, "y"}};
  std::map<int, RankStall> stalls = {{1, inside(0xA, 5)}, {0, inside(0xC, 2)}};
  const auto hangs = find_hangs(stalls, groups);
  ASSERT_EQ(hangs.size(), 2u);
  EXPECT_EQ(hangs[0].missing, (std::vector<int>{0}));
  EXPECT_EQ(hangs[1].missing, (std::vector<int>{1}));
}

TEST(Hang, NothingWhenEveryMemberIsInsideTheSameCallOrNoneWaitsInACollective) {
  std::map<int, RankStall> all_in = {{1, inside(0xC, 7, 10, "AllReduce")}, {5, inside(0xC, 7, 10, "AllReduce")}};
  EXPECT_TRUE(find_hangs(all_in, {kGroups[2]}).empty());
  std::map<int, RankStall> p2p = {{1, inside(0xC, 0, 10, "Send")}};  // a send waits for its peer alone
  EXPECT_TRUE(find_hangs(p2p, {kGroups[2]}).empty());
  std::map<int, RankStall> none_in = {{0, outside({{0xA, 3}})}, {1, outside({{0xA, 3}})}};
  EXPECT_TRUE(find_hangs(none_in, kGroups).empty());
  EXPECT_TRUE(find_hangs({}, kGroups).empty());
}

Now at(double s) {
  Now n;
  n.mono_s = n.job_s = s;
  n.unix_ms = 1'700'000'000'000 + static_cast<std::int64_t>(s * 1000);
  return n;
}

Event stall_event(int rank, const RankStall& s, double t) {
  Event e;
  e.type = event_type::kStall;
  e.t_s = t;
  e.rank = rank;
  e.node = rank / 2;
  e.source = "agent:" + std::to_string(rank / 2);
  e.detail = to_json(s.detail);
  return e;
}

// The controller: a hang is named once its missing rank reported too (or after 10 s), once per call, with
// an event, in the state and in the counters; a stall_end forgets the rank.
TEST(Controller, AHangIsNamedOnceWithTheRanksItWaitsFor) {
  Controller c(ControllerConfig{}, "tag");
  c.load(MasterState{}, std::nullopt, 0, "0-0", at(0));
  int id = 0;
  auto feed = [&](std::vector<Event> events, double t) {
    std::vector<store::Entry<Event>> entries;
    for (Event& e : events) entries.push_back({std::to_string(++id) + "-0", std::move(e), ""});
    c.apply(entries, at(t));
    c.adopt(at(t));
  };
  JobInputs groups;
  groups.groups = {kGroups[0]};
  feed({stall_event(0, inside(0xA, 41), 70), stall_event(1, inside(0xA, 41), 70), stall_event(3, inside(0xA, 41), 70)}, 70);
  EXPECT_TRUE(c.needs(at(70)).groups) << "the groups are read to name the hang";
  Intents it = c.step(at(70), groups);
  EXPECT_TRUE(it.events.empty()) << "rank 2 has not reported yet: wait for it (up to 10 s)";
  feed({stall_event(2, outside({{0xA, 40}}), 71)}, 71);
  EXPECT_FALSE(c.needs(at(70.5)).groups) << "at most once a second";
  it = c.step(at(71.5), groups);
  ASSERT_EQ(it.events.size(), 1u);
  EXPECT_EQ(it.events[0].type, event_type::kHang);
  EXPECT_EQ(it.events[0].rank, 2);
  std::string err;
  const auto h = parse_hang_detail(it.events[0].detail, &err);
  ASSERT_TRUE(h) << err;
  EXPECT_EQ(h->missing, (std::vector<int>{2}));
  EXPECT_EQ(h->waiting, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(c.state().hangs_total, 1);
  ASSERT_EQ(c.state().hangs.size(), 1u);
  EXPECT_EQ(c.stats().hangs, 1);
  // Named once.
  EXPECT_TRUE(c.step(at(73), groups).events.empty());
  // Rank 2 goes on, then the others: forgotten; the same call hanging again later is named again.
  feed({[] { Event e; e.type = event_type::kStallEnd; e.t_s = 80; e.rank = 2; e.node = 1; e.source = "agent:1"; return e; }()}, 80);
  for (int r : {0, 1, 3}) {
    Event e;
    e.type = event_type::kStallEnd;
    e.t_s = 80;
    e.rank = r;
    e.node = r / 2;
    e.source = "agent:" + std::to_string(r / 2);
    feed({e}, 80);
  }
  EXPECT_FALSE(c.needs(at(90)).groups);
  // Without the missing rank's report, the hang is named 10 s after the first stall report.
  feed({stall_event(0, inside(0xA, 50), 100), stall_event(1, inside(0xA, 50), 100), stall_event(3, inside(0xA, 50), 100)}, 100);
  EXPECT_TRUE(c.step(at(105), groups).events.empty());
  it = c.step(at(110.5), groups);
  ASSERT_EQ(it.events.size(), 1u);
  EXPECT_EQ(parse_hang_detail(it.events[0].detail, &err)->missing_last_seq.at(2), -1);
}

}  // namespace
}  // namespace greyhound::master
