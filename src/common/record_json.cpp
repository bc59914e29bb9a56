#include "common/record_json.h"

#include <cstdio>

#include "greyhound/ops.h"

namespace greyhound {

std::string group_id_hex(std::uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

bool parse_group_id_hex(const std::string& hex, std::uint64_t* id) {
  if (hex.empty() || hex.size() > 16) return false;
  std::uint64_t v = 0;
  for (char c : hex) {
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= static_cast<std::uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= static_cast<std::uint64_t>(c - 'a' + 10);
    } else {
      return false;
    }
  }
  *id = v;
  return true;
}

nlohmann::ordered_json record_to_json(const RecordPayload& p, int rank) {
  nlohmann::ordered_json j;
  j["rank"] = rank;
  j["seq"] = p.seq;
  j["t_ns"] = p.t_ns;
  j["op"] = std::string(op_name(static_cast<Op>(p.op)));
  j["group"] = group_id_hex(p.group_id);
  j["group_rank"] = p.group_rank;
  j["group_size"] = p.group_size;
  j["count"] = p.count;
  j["dtype"] = p.dtype == 0xff ? std::string("none") : std::string(dtype_name(p.dtype));
  j["bytes"] = p.bytes;
  j["peer"] = p.peer;
  j["root"] = p.root;
  j["stream"] = p.stream;
  j["tid"] = p.tid;
  j["result"] = p.result;
  j["in_group"] = (p.flags & kRecordInGroup) != 0;
  j["color"] = p.color;
  if (static_cast<Op>(p.op) == Op::kTiming) {
    j["measured_op"] = std::string(op_name(static_cast<Op>(p.measured_op)));
    j["measured_seq"] = p.aux;
    j["dur_ns"] = p.dur_ns;
  } else {
    j["parent_group"] = group_id_hex(p.aux);
  }
  return j;
}

}  // namespace greyhound
