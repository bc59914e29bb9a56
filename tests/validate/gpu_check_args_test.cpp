// The GPU checks' argument handling, in CI (no GPU): greyhound-gpu-check (bench/gpu) and scripts/gpu-check
// answer --help, refuse bad arguments with exit 2 and one line naming them, and, without a usable GPU,
// exit 1 saying so (on a machine with one, greyhound-gpu-check's report is checked instead).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct Ran {
  int code = -1;
  std::string out;
};

Ran run(const std::string& cmd) {
  Ran r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kTool = GREYHOUND_GPU_CHECK;
const std::string kScript = std::string(GREYHOUND_SOURCE_DIR) + "/scripts/gpu-check";

TEST(GpuCheck, TheToolAnswersHelpAndRefusesBadArguments) {
  Ran r = run(kTool + " --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("usage: greyhound-gpu-check"), std::string::npos) << r.out;
  const std::pair<const char*, const char*> bad[] = {
      {"--bogus", "--bogus"},          {"--gemm-n 5", "--gemm-n"},         {"--gemm-n x", "--gemm-n"},
      {"--sizes 1,x", "--sizes: 'x'"}, {"--sizes 0", "--sizes: '0'"},      {"--sizes 1,2,3,4,5", "1 to 4 sizes"},
      {"--repeats 0", "--repeats"},    {"--repeats", "--repeats"},
  };
  for (const auto& [args, why] : bad) {
    r = run(kTool + " " + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << args << ": " << r.out;
  }
}

TEST(GpuCheck, TheToolSaysWhenThereIsNoGpuOrReportsWhatItMeasured) {
  const Ran r = run(kTool + " --gemm-n 1024 --sizes 1048576 --repeats 1 --no-pause");
  if (r.code == 1 && r.out.find("no usable CUDA device") != std::string::npos) return;  // CI: no GPU
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["gemm"]["fp32"]["tflops"].get<double>(), 0);
  EXPECT_GT(j["gemm"]["fp16"]["tflops"].get<double>(), 0);
  // FP8 where the device has it (compute capability 8.9 on), else why not.
  const auto& fp8 = j["gemm"]["fp8"];
  if (fp8.value("ran", false)) {
    EXPECT_GT(fp8["tflops"].get<double>(), 0);
    EXPECT_TRUE(fp8["correct"].get<bool>()) << fp8.dump();
  } else {
    EXPECT_NE(fp8.value("why", "").find("compute capability"), std::string::npos) << fp8.dump();
  }
  EXPECT_TRUE(j["p2p_self"]["intact"].get<bool>());
}

TEST(GpuCheck, TheScriptAnswersHelpAndRefusesBadArguments) {
  Ran r = run(kScript + " --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("usage: scripts/gpu-check"), std::string::npos) << r.out;
  r = run(kScript + " --bogus");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown option '--bogus'"), std::string::npos) << r.out;
  r = run(kScript + " /nonexistent-build-dir");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no build directory"), std::string::npos) << r.out;
  r = run(kScript + " a b");
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST(GpuCheck, TheBundleScriptAnswersHelpAndRefusesBadArguments) {
  const std::string bundle = std::string(GREYHOUND_SOURCE_DIR) + "/scripts/gpu-bundle";
  Ran r = run(bundle + " --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("usage: scripts/gpu-bundle"), std::string::npos) << r.out;
  r = run(bundle + " --bogus");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown option '--bogus'"), std::string::npos) << r.out;
  r = run(bundle + " a b c");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run(bundle + " /tmp/gh-same-dir /tmp/gh-same-dir/");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("must not be the build directory"), std::string::npos) << r.out;
}

}  // namespace
