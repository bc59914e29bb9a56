// A group's Redis hash (store/job_store.h, parse_group_hash) on any fields: the input's lines are the group
// id, then field, value, field, value, ... It never crashes; a refusal says why; a group it accepts has its
// members within its size and every rank within greyhound's bounds, and what it accepts, written back the way
// the agents write a group (AgentUpdate::group_member, group_ops, group_nccl_ring), reads back the same and
// without error.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_check.h"
#include "store/job_store.h"

namespace {

namespace gh = greyhound;
using greyhound::RedisReply;
using greyhound::fuzz::check;

RedisReply string_reply(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}

RedisReply hash_of(const std::vector<std::pair<std::string, std::string>>& fields) {
  RedisReply h;
  h.type = RedisReply::Type::kArray;
  for (const auto& [k, v] : fields) {
    h.elements.push_back(string_reply(k));
    h.elements.push_back(string_reply(v));
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gh::fuzz::text_of(data, size);
  std::vector<std::string> lines;
  std::size_t from = 0;
  while (from <= text.size()) {
    const std::size_t nl = text.find('\n', from);
    lines.push_back(text.substr(from, nl == std::string::npos ? std::string::npos : nl - from));
    if (nl == std::string::npos) break;
    from = nl + 1;
  }
  const std::string hex = lines.front();
  RedisReply h;
  h.type = RedisReply::Type::kArray;
  for (std::size_t i = 1; i < lines.size(); ++i) h.elements.push_back(string_reply(lines[i]));  // an odd last one too

  const auto e = gh::store::parse_group_hash(hex, h);
  if (!e.value) {
    check(!e.error.empty(), "a refusal says why");
    return 0;
  }
  const gh::GroupRecord& g = *e.value;
  check(g.size >= 0 && g.size <= gh::kMaxRank, "a size within the bounds");
  for (const auto& [gr, r] : g.members) {
    check(gr >= 0 && r >= 0 && r <= gh::kMaxRank, "members are ranks");
    check(g.size == 0 || gr < g.size, "members within the group's size");
  }
  for (const auto& [r, counts] : g.ops) {
    check(r >= 0 && r <= gh::kMaxRank, "op counts under a rank");
    for (const auto& [op, n] : counts) check(op.size() <= 64, "op names are bounded");
  }
  check(g.created_by.size() <= 64, "created_by is bounded");
  for (const auto& [gr, n] : g.nodes) check(gr >= 0 && n >= 0 && n <= gh::kMaxRank, "nodes are nodes");
  if (g.nccl_ring) {
    const gh::NcclRingDump& d = *g.nccl_ring;
    check(!d.segment.empty() && d.segment.size() <= 4096, "a dumped ring's part is bounded");
    for (int r : d.segment) check(r >= 0 && (g.size == 0 || r < g.size), "a dumped ring's ranks are the group's");
    check(d.channels >= 1 && d.channels <= 1024, "channels are bounded");
    if (d.tree) {
      check(std::is_permutation(d.tree->segment.begin(), d.tree->segment.end(), d.segment.begin(), d.segment.end()),
            "a dumped tree's chain holds the ring's part's ranks");
    }
  }

  // Written back as the agents write it, it reads back the same.
  std::vector<std::pair<std::string, std::string>> fields;
  if (g.size > 0) fields.emplace_back("size", std::to_string(g.size));
  for (const auto& [gr, r] : g.members) fields.emplace_back("member:" + std::to_string(gr), std::to_string(r));
  for (const auto& [gr, n] : g.nodes) fields.emplace_back("node:" + std::to_string(gr), std::to_string(n));
  if (g.nccl_ring) fields.emplace_back("nccl_ring", gh::to_json(*g.nccl_ring).dump());
  fields.emplace_back("created_by", nlohmann::json(g.created_by).dump());
  for (const auto& [r, counts] : g.ops) fields.emplace_back("ops:" + std::to_string(r), nlohmann::json(counts).dump());
  const auto again = gh::store::parse_group_hash(hex, hash_of(fields));
  check(again.value.has_value(), "what it accepted reads back: " + again.error);
  check(again.error.empty(), "without error: " + again.error);
  check(again.value->id == g.id && again.value->size == g.size && again.value->members == g.members &&
            again.value->created_by == g.created_by && again.value->ops == g.ops && again.value->nodes == g.nodes &&
            again.value->nccl_ring == g.nccl_ring,
        "and the same");
  return 0;
}
