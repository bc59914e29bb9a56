// greyhoundctl period / detect, run as a process on the fixture CSVs of tests/analysis/data
// (make_fixtures.py writes them): JSON output, --method, and bad input (exit 2, one line naming row and
// column).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string fixture(const std::string& name) { return std::string(ANALYSIS_FIXTURES) + "/" + name; }

Result run(const std::string& args) {
  // One file per test process: ctest runs the tests of this binary in parallel.
  const std::string err_path = testing::TempDir() + "greyhoundctl_stderr." + std::to_string(getpid()) + ".txt";
  const std::string cmd = std::string(GREYHOUNDCTL_PATH) + " " + args + " 2>" + err_path;
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

}  // namespace

TEST(CtlPeriod, PeriodStartAndIterationTimes) {
  const auto r = run("period --ops " + fixture("ops_periodic.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["period"], 12);
  EXPECT_EQ(j["start"], 3);  // three CommInitRank rows precede the first iteration
  const auto& its = j["iterations"];
  ASSERT_EQ(its.size(), 59u);
  double t_s = 1.003;  // iteration 0 starts at 1.003 s
  for (std::size_t k = 0; k < its.size(); ++k) {
    const double expected_ms = k >= 30 && k < 45 ? 150.0 : 100.0;
    t_s += expected_ms / 1000.0;
    EXPECT_EQ(its[k]["index"], k);
    EXPECT_DOUBLE_EQ(its[k]["iter_ms"].get<double>(), expected_ms) << k;
    EXPECT_NEAR(its[k]["t_s"].get<double>(), t_s, 1e-9) << k;
  }
  ASSERT_EQ(j["segments"].size(), 1u);
  EXPECT_EQ(j["segments"][0]["period"], 12);
  EXPECT_EQ(j["segments"][0]["first_index"], 0);
}

TEST(CtlPeriod, ChangeOfPeriodGivesTwoSegments) {
  const auto r = run("period --ops " + fixture("ops_period_change.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["period"], 20);
  ASSERT_EQ(j["segments"].size(), 2u);
  EXPECT_EQ(j["segments"][0]["period"], 12);
  EXPECT_EQ(j["segments"][1]["period"], 20);
  // Every reported iteration is 100 or 150 ms: the switch itself is never measured as an iteration.
  for (const auto& it : j["iterations"]) {
    const double ms = it["iter_ms"].get<double>();
    EXPECT_TRUE(ms == 100.0 || ms == 150.0) << it.dump();
  }
  EXPECT_GE(j["iterations"].size(), 85u);
}

TEST(CtlDetect, EventsOfEachMethod) {
  for (const char* method : {"", " --method bocd+v", " --method bocd", " --method window"}) {
    const auto r = run("detect --trace " + fixture("trace_slowdown.csv") + method);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto events = json_lines(r.out);
    ASSERT_EQ(events.size(), 2u) << method;
    // The window decides when 6 of its 11 are off; BOCD decides a flat change of 1.5x on its 4th iteration
    // (the severe rule).
    const int lag = std::string(method) == " --method window" ? 5 : 3;
    EXPECT_EQ(events[0]["event"], "slowdown");
    EXPECT_EQ(events[0]["index"], 30);
    EXPECT_EQ(events[0]["detected_index"], 30 + lag);
    EXPECT_NEAR(events[0]["t_s"].get<double>(), 9.45235, 1e-9);  // t_s of row `index`
    EXPECT_NEAR(events[0]["after_ms"].get<double>() / events[0]["before_ms"].get<double>(), 1.5, 0.02);
    EXPECT_NEAR(events[0]["ratio"].get<double>(), 1.5, 0.02);
    EXPECT_EQ(events[1]["event"], "recovery");
    EXPECT_EQ(events[1]["index"], 55);
    EXPECT_EQ(events[1]["detected_index"], 55 + lag);
    // The contract's field order.
    EXPECT_EQ(r.out.find("{\"event\":"), 0u);
    EXPECT_NE(r.out.find("\"index\":30,\"detected_index\":" + std::to_string(30 + lag) + ",\"t_s\":"),
              std::string::npos);
  }
}

TEST(CtlDetect, BadInputNamesRowAndColumn) {
  struct Case {
    const char* command;
    const char* file;
    const char* needle;
  };
  const Case cases[] = {
      {"detect --trace", "empty.csv", "row 1, column 1 (t_s): empty file"},
      {"detect --trace", "trace_missing_header.csv", "row 1, column 1 (t_s): missing header"},
      {"detect --trace", "trace_non_numeric.csv", "row 4, column 2 (iter_ms): 'abc' is not a finite number"},
      {"detect --trace", "trace_hex.csv", "row 3, column 2 (iter_ms): '0x10' is not a finite number"},
      {"detect --trace", "trace_huge_time.csv", "row 3, column 2 (iter_ms): iteration time 1e300 ms is outside [0.001, 1e9]"},
      {"detect --trace", "trace_negative_time.csv", "row 3, column 1 (t_s): negative time"},
      {"detect --trace", "trace_wrong_columns.csv", "row 3, column 3: expected 2 columns, got 3"},
      {"period --ops", "empty.csv", "row 1, column 1 (t_ns): empty file"},
      {"period --ops", "ops_missing_header.csv", "row 1, column 1 (t_ns): missing header"},
      {"period --ops", "ops_bad_bytes.csv", "row 3, column 4 (bytes): '12x' is not a non-negative integer"},
      {"period --ops", "ops_negative_time.csv", "row 3, column 1 (t_ns): '-2000' is negative"},
  };
  for (const auto& c : cases) {
    const auto r = run(std::string(c.command) + " " + fixture(c.file));
    EXPECT_EQ(r.exit_code, 2) << c.file;
    EXPECT_TRUE(r.out.empty()) << c.file;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.file << ": " << r.err;
    EXPECT_NE(r.err.find(c.file), std::string::npos) << r.err;
    // One line.
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

TEST(CtlDetect, AHugeCellIsQuotedInPart) {
  // A 5 MB cell: the error quotes its first 64 bytes, not the whole of it.
  const std::string path = ::testing::TempDir() + "/gh-huge-cell.csv";
  std::ofstream(path) << "t_s,iter_ms\n0,400\n1," << std::string(5 << 20, 'z') << "\n";
  const auto r = run("detect --trace " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("row 3, column 2 (iter_ms): '" + std::string(64, 'z') + "...' is not a finite number"),
            std::string::npos)
      << r.err.substr(0, 300);
  EXPECT_LT(r.err.size(), 400u);
  std::remove(path.c_str());
}

TEST(CtlDetect, BadUsage) {
  const auto unknown = run("detect --trace " + fixture("trace_slowdown.csv") + " --method cusum");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--method: 'cusum' is not one of bocd+v, bocd, window"), std::string::npos) << unknown.err;
  const auto missing = run("detect");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--trace is required"), std::string::npos) << missing.err;
  const auto absent = run("detect --trace " + fixture("no_such_file.csv"));
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_NE(absent.err.find("cannot open"), std::string::npos) << absent.err;
  const auto acf = run("period --ops " + fixture("ops_periodic.csv") + " --min-acf 1.5");
  EXPECT_EQ(acf.exit_code, 2);
}

TEST(CtlPeriod, NoPeriodExitsOne) {
  const std::string header_only = testing::TempDir() + "header_only.csv";
  std::ofstream(header_only) << "t_ns,op,group,bytes\n";
  const auto none = run("period --ops " + header_only);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_TRUE(none.out.empty());
  EXPECT_NE(none.err.find("no period"), std::string::npos) << none.err;
  // A trace file is not an op stream: its header is rejected.
  const auto wrong = run("period --ops " + fixture("trace_slowdown.csv"));
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("row 1, column 1 (t_ns): missing header"), std::string::npos) << wrong.err;
}
