// greyhoundctl period / detect: the LocalAnalyzer's algorithms (src/analysis) on recorded data.
//
//   greyhoundctl period --ops FILE.csv [--min-acf 0.95]
//     FILE.csv: header t_ns,op,group,bytes; one NCCL call per row (t_ns a non-negative integer, op and group
//     any non-empty token, e.g. "AllReduce" and a group id, bytes a non-negative integer).
//     Prints {"period":P,"start":I,"iterations":[{"index":k,"t_s":..,"iter_ms":..},...],"segments":[...]}:
//     P and I (the row index, 0-based over data rows, where cycle 0 starts) of the last lock, every iteration
//     (t_s: when it ended), and one {"period","first_index"} per lock (several after a change of
//     period). Exit 1 when no period is found.
//   greyhoundctl detect --trace FILE.csv [--method bocd+v|bocd|window]
//     FILE.csv: header t_s,iter_ms; one row per iteration. Reads it strictly in order through the online
//     detector and prints one JSON object per event as it is decided:
//     {"event":"slowdown"|"recovery","index":i,"detected_index":j,"t_s":..,"before_ms":..,"after_ms":..,"ratio":..}
//     (index: first iteration at the new level; detected_index: the row after which it was decided; t_s: of
//     row `index`).
// Bad input (missing header, wrong column count, non-numeric cell, negative or decreasing time, empty file)
// is reported as one line naming the file, row (1-based line number) and column, and exits 2.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "common/text.h"
#include "greyhound/analysis/period_detector.h"
#include "greyhound/analysis/slowdown_detector.h"

namespace greyhound::ctl {
namespace {

namespace ga = greyhound::analysis;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> cells;
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = line.find(',', from);
    cells.push_back(trim(line.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from)));
    if (comma == std::string_view::npos) return cells;
    from = comma + 1;
  }
}

// A CSV file with a fixed header, read row by row; every error names file, row and column.
class CsvReader {
 public:
  CsvReader(const std::string& path, std::vector<std::string> header) : path_(path), header_(std::move(header)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ArgError(path + ": cannot open: " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    text_ = ss.str();
    std::string joined;
    for (std::size_t i = 0; i < header_.size(); ++i) joined += (i ? "," : "") + header_[i];
    if (trim(text_).empty()) throw error(1, 1, "empty file, expected the header line '" + joined + "'");
    std::string_view first;
    if (!next_line(&first)) throw error(1, 1, "empty file, expected the header line '" + joined + "'");
    const auto cells = split(first);
    for (std::size_t c = 0; c < header_.size(); ++c) {
      if (c >= cells.size() || cells[c] != header_[c]) {
        throw error(row_, c + 1, "missing header: expected '" + joined + "', got '" + printable(trim(first), 128) + "'");
      }
    }
    if (cells.size() > header_.size()) {
      throw error(row_, header_.size() + 1, "missing header: expected '" + joined + "', got '" + printable(trim(first), 128) + "'");
    }
  }

  // Next data row (blank lines are skipped); false at the end of the file.
  bool next(std::vector<std::string_view>* cells) {
    std::string_view line;
    do {
      if (!next_line(&line)) return false;
    } while (trim(line).empty());
    *cells = split(line);
    if (cells->size() != header_.size()) {
      throw error(row_, std::min(cells->size(), header_.size()) + 1,
                  "expected " + std::to_string(header_.size()) + " columns, got " + std::to_string(cells->size()));
    }
    return true;
  }

  std::size_t row() const { return row_; }

  ArgError error(std::size_t row, std::size_t column, const std::string& what) const {
    std::string name = column >= 1 && column <= header_.size() ? " (" + header_[column - 1] + ")" : "";
    return ArgError(path_ + ": row " + std::to_string(row) + ", column " + std::to_string(column) + name + ": " + what);
  }

  double number(std::string_view cell, std::size_t column) const {
    const std::optional<double> v = parse_decimal(cell);
    if (!v) throw error(row_, column, "'" + printable(cell, 64) + "' is not a finite number");
    return *v;
  }

  std::uint64_t unsigned_integer(std::string_view cell, std::size_t column) const {
    const std::string s(cell);
    if (!s.empty() && s[0] == '-') throw error(row_, column, "'" + printable(s, 64) + "' is negative");
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || errno != 0 || *end != '\0' || s.find_first_not_of("0123456789") != std::string::npos) {
      throw error(row_, column, "'" + printable(s, 64) + "' is not a non-negative integer");
    }
    return v;
  }

 private:
  bool next_line(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    const std::size_t nl = text_.find('\n', pos_);
    const std::size_t end = nl == std::string::npos ? text_.size() : nl;
    *line = std::string_view(text_).substr(pos_, end - pos_);
    pos_ = nl == std::string::npos ? text_.size() : nl + 1;
    ++row_;
    return true;
  }

  std::string path_;
  std::vector<std::string> header_;
  std::string text_;
  std::size_t pos_ = 0;
  std::size_t row_ = 0;
};

// FNV-1a: tokens of the CSV (op name, group id) to numbers for op_symbol(); only equality matters.
std::uint64_t token_hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

int cmd_period(const Argv& argv) {
  const Args args(argv, {"ops", "min-acf"}, {});
  const std::string path = args.str("ops");
  ga::PeriodParams params;
  params.min_acf = args.number("min-acf", params.min_acf);
  if (!(params.min_acf > 0.0 && params.min_acf <= 1.0)) throw ArgError("--min-acf must be in (0, 1]");

  CsvReader csv(path, {"t_ns", "op", "group", "bytes"});
  ga::PeriodDetector detector(params);
  std::vector<ga::Iteration> iterations;
  std::vector<std::string_view> cells;
  std::uint64_t previous_t = 0;
  bool any = false;
  while (csv.next(&cells)) {
    const std::uint64_t t_ns = csv.unsigned_integer(cells[0], 1);
    if (cells[1].empty()) throw csv.error(csv.row(), 2, "empty op");
    if (cells[2].empty()) throw csv.error(csv.row(), 3, "empty group");
    const std::uint64_t bytes = csv.unsigned_integer(cells[3], 4);
    if (any && t_ns < previous_t) {
      throw csv.error(csv.row(), 1, std::to_string(t_ns) + " is earlier than the previous row's " + std::to_string(previous_t));
    }
    previous_t = t_ns;
    any = true;
    detector.push(t_ns, ga::op_symbol(token_hash(cells[1]), token_hash(cells[2]), bytes), iterations);
  }
  detector.finish(iterations);  // the file is all there is: accept a lock still awaiting confirmation
  if (detector.locks() == 0) {
    std::fprintf(stderr, "greyhoundctl period: %s: no period with autocorrelation >= %g in %llu records\n",
                 path.c_str(), params.min_acf, static_cast<unsigned long long>(detector.records()));
    return 1;
  }

  nlohmann::ordered_json out;
  out["period"] = detector.period();
  out["start"] = detector.cycle_start();
  auto& its = out["iterations"] = nlohmann::ordered_json::array();
  auto& segments = out["segments"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    const auto& it = iterations[i];
    its.push_back({{"index", it.index}, {"t_s", static_cast<double>(it.end_t_ns) / 1e9}, {"iter_ms", it.iter_ns / 1e6}});
    if (i == 0 || it.segment != iterations[i - 1].segment) {
      segments.push_back({{"period", it.period}, {"first_index", it.index}});
    }
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int cmd_detect(const Argv& argv) {
  const Args args(argv, {"trace", "method"}, {});
  const std::string path = args.str("trace");
  const std::string method_text = args.str("method", "bocd+v");
  const auto method = ga::method_from_name(method_text);
  if (!method) throw ArgError("--method: '" + method_text + "' is not one of bocd+v, bocd, window");

  CsvReader csv(path, {"t_s", "iter_ms"});
  auto detector = ga::make_slowdown_detector(*method);
  std::vector<double> t_s;
  std::vector<ga::SlowdownEvent> events;
  std::vector<std::string_view> cells;
  while (csv.next(&cells)) {
    const double t = csv.number(cells[0], 1);
    const double iter_ms = csv.number(cells[1], 2);
    if (t < 0.0) throw csv.error(csv.row(), 1, "negative time " + std::string(cells[0]));
    if (!t_s.empty() && t < t_s.back()) {
      throw csv.error(csv.row(), 1, std::string(cells[0]) + " is earlier than the previous row's time");
    }
    if (iter_ms <= 0.0) throw csv.error(csv.row(), 2, "iteration time " + std::string(cells[1]) + " is not positive");
    // A microsecond to about eleven days: beyond, ratios between iterations are not finite numbers.
    if (iter_ms < 1e-3 || iter_ms > 1e9) {
      throw csv.error(csv.row(), 2, "iteration time " + std::string(cells[1]) + " ms is outside [0.001, 1e9]");
    }
    t_s.push_back(t);
    events.clear();
    detector->push(iter_ms, events);
    for (const auto& e : events) {
      nlohmann::ordered_json j;
      j["event"] = std::string(ga::direction_name(e.direction));
      j["index"] = e.index;
      j["detected_index"] = e.detected_index;
      j["t_s"] = t_s[e.index];
      j["before_ms"] = e.before_ms;
      j["after_ms"] = e.after_ms;
      j["ratio"] = e.ratio;
      std::printf("%s\n", j.dump().c_str());
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace greyhound::ctl
