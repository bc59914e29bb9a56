#include "sim/fault_schedule.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"

namespace greyhound::sim {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& why) {
  throw FaultScheduleError(where + ": " + why);
}

double number(const json& o, const std::string& key, const std::string& where) {
  if (!o.contains(key)) bad(where + "." + key, "missing");
  const json& v = o.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) bad(where + "." + key, "must be a finite number");
  return v.get<double>();
}

int index_value(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1 << 24)) {
    bad(where, "must be a non-negative integer");
  }
  return static_cast<int>(v.get<long long>());
}

}  // namespace

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kGpu: return "gpu";
    case FaultKind::kLink: return "link";
    case FaultKind::kCpu: return "cpu";
    case FaultKind::kKill: return "kill";
    case FaultKind::kHang: return "hang";
  }
  return "?";
}

FaultSchedule FaultSchedule::parse_text(const std::string& text) {
  auto j = parse_bounded(text);
  if (!j) throw FaultScheduleError(j.error());
  return parse(*j);
}

FaultSchedule FaultSchedule::parse(const json& j) {
  if (!j.is_object()) bad("(top level)", "must be an object {\"faults\": [...]}");
  for (const auto& [key, _] : j.items()) {
    if (key != "faults") bad(key, "unknown field (expected only \"faults\")");
  }
  if (!j.contains("faults")) bad("faults", "missing");
  const json& arr = j.at("faults");
  if (!arr.is_array()) bad("faults", "must be an array");
  std::vector<Fault> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string where = "faults[" + std::to_string(i) + "]";
    const json& o = arr[i];
    if (!o.is_object()) bad(where, "must be an object");
    if (!o.contains("kind") || !o.at("kind").is_string()) bad(where + ".kind", "must be \"gpu\", \"link\", \"cpu\", \"kill\" or \"hang\"");
    const std::string kind = o.at("kind").get<std::string>();
    Fault f;
    std::set<std::string> allowed = {"kind", "start_s", "end_s", "label"};
    if (kind == "gpu" || kind == "cpu") {
      f.kind = kind == "gpu" ? FaultKind::kGpu : FaultKind::kCpu;
      allowed.insert({"rank", "slowdown"});
      if (!o.contains("rank")) bad(where + ".rank", "missing");
      f.rank = index_value(o.at("rank"), where + ".rank");
      f.slowdown = number(o, "slowdown", where);
      if (f.slowdown < 1.0 || f.slowdown > 1000.0) bad(where + ".slowdown", "must be a number in [1, 1000]");
    } else if (kind == "link") {
      f.kind = FaultKind::kLink;
      allowed.insert({"nodes", "bandwidth_factor"});
      if (!o.contains("nodes")) bad(where + ".nodes", "missing");
      const json& n = o.at("nodes");
      if (!n.is_array() || n.size() != 2) bad(where + ".nodes", "must be an array of two node indices");
      f.nodes = {index_value(n[0], where + ".nodes[0]"), index_value(n[1], where + ".nodes[1]")};
      if (f.nodes[0] == f.nodes[1]) bad(where + ".nodes", "must name two different nodes");
      f.bandwidth_factor = number(o, "bandwidth_factor", where);
      if (!(f.bandwidth_factor > 0.0 && f.bandwidth_factor <= 1.0)) {
        bad(where + ".bandwidth_factor", "must be a number in (0, 1]");
      }
    } else if (kind == "kill" || kind == "hang") {
      f.kind = kind == "kill" ? FaultKind::kKill : FaultKind::kHang;
      allowed.insert("rank");
      if (!o.contains("rank")) bad(where + ".rank", "missing");
      f.rank = index_value(o.at("rank"), where + ".rank");
    } else {
      bad(where + ".kind", "must be \"gpu\", \"link\", \"cpu\", \"kill\" or \"hang\", not \"" + kind + "\"");
    }
    for (const auto& [key, _] : o.items()) {
      if (allowed.count(key) == 0) bad(where + "." + key, "unknown field for kind \"" + kind + "\"");
    }
    f.start_s = number(o, "start_s", where);
    f.end_s = f.kind == FaultKind::kKill && !o.contains("end_s") ? f.start_s + 1.0 : number(o, "end_s", where);
    if (f.start_s < 0) bad(where + ".start_s", "must be >= 0");
    if (f.end_s <= f.start_s) bad(where + ".end_s", "must be greater than start_s");
    if (o.contains("label")) {
      if (!o.at("label").is_string()) bad(where + ".label", "must be a string");
      f.label = o.at("label").get<std::string>();
    }
    out.push_back(f);
  }
  return FaultSchedule(std::move(out));
}

std::string FaultSchedule::shape_error(int world, int nodes) const {
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    const std::string where = "faults[" + std::to_string(i) + "]";
    if (f.kind == FaultKind::kLink) {
      for (int n : f.nodes) {
        if (n < 0 || n >= nodes) {
          return where + ".nodes: " + std::to_string(n) + " is not a node of this cluster (0.." + std::to_string(nodes - 1) + ")";
        }
      }
    } else if (f.rank < 0 || f.rank >= world) {
      return where + ".rank: " + std::to_string(f.rank) + " is not a rank of this job (0.." + std::to_string(world - 1) + ")";
    }
  }
  return "";
}

json FaultSchedule::to_json() const {
  json arr = json::array();
  for (const Fault& f : faults_) {
    json o;
    o["kind"] = fault_kind_name(f.kind);
    if (f.kind == FaultKind::kLink) {
      o["nodes"] = {f.nodes[0], f.nodes[1]};
      o["bandwidth_factor"] = f.bandwidth_factor;
    } else if (f.kind == FaultKind::kKill || f.kind == FaultKind::kHang) {
      o["rank"] = f.rank;
    } else {
      o["rank"] = f.rank;
      o["slowdown"] = f.slowdown;
    }
    o["start_s"] = f.start_s;
    o["end_s"] = f.end_s;
    if (!f.label.empty()) o["label"] = f.label;
    arr.push_back(o);
  }
  return json{{"faults", arr}};
}

double FaultSchedule::gpu_slowdown(int rank, double t_s) const {
  double s = 1.0;
  for (const Fault& f : faults_) {
    if (f.kind == FaultKind::kGpu && f.rank == rank && f.active(t_s)) s *= f.slowdown;
  }
  return s;
}

double FaultSchedule::hung_until(int rank, double t_s) const {
  double until = 0;
  for (const Fault& f : faults_) {
    if (f.kind == FaultKind::kHang && f.rank == rank && f.active(t_s)) until = std::max(until, f.end_s);
  }
  return until;
}

bool FaultSchedule::killed(int rank, double t_s) const {
  for (const Fault& f : faults_) {
    if (f.kind == FaultKind::kKill && f.rank == rank && t_s >= f.start_s) return true;
  }
  return false;
}

double FaultSchedule::cpu_slowdown(int rank, double t_s) const {
  double s = 1.0;
  for (const Fault& f : faults_) {
    if (f.kind == FaultKind::kCpu && f.rank == rank && f.active(t_s)) s *= f.slowdown;
  }
  return s;
}

double FaultSchedule::link_factor(int a, int b, double t_s) const {
  if (a == b) return 1.0;
  double s = 1.0;
  for (const Fault& f : faults_) {
    if (f.kind != FaultKind::kLink || !f.active(t_s)) continue;
    if ((f.nodes[0] == a && f.nodes[1] == b) || (f.nodes[0] == b && f.nodes[1] == a)) s *= f.bandwidth_factor;
  }
  return s;
}

}  // namespace greyhound::sim
