// greyhound-gpu-check: the validation's tests on a real GPU (scripts/gpu-check runs it; never in CI, which
// only checks its arguments and its refusal without a GPU). Linked against the real CUDA runtime, cuBLAS
// and NCCL of the toolkit.
//  1. GEMM through cublasGemmEx, n x n x n, FP32 and FP16 (FP32 compute), one warm-up and `repeats` runs
//     each, CUDA events: the medians, TFLOP/s and where they stand against the device's expected range; and
//     FP8 through cublasLtMatmul (E4M3 in, BF16 out, the "TN" layout, as the hook runs it) where the
//     device's compute capability is 8.9 or more, else reported as not run and why.
//  2. A single-GPU P2P self-test: ncclSend and ncclRecv to itself in one group on a one-rank communicator,
//     each size `repeats` times: GB/s and whether the bytes arrived intact.
//  3. With libgreyhound.so preloaded (and its ring in GREYHOUND_SHM_DIR), a one-rank validation pause: this
//     process marks its iterations as a framework does, plays the agent's part in its own ring (arm at
//     iteration 2, run, resume) and checks that the hook trapped at the cut, ran the GEMMs on the real
//     libraries (FP8 too where the device has it) and resumed; its GEMM times beside step 1's.
// One JSON object on stdout (or --out FILE). Exit 0: all ran; 1: no usable GPU or a step failed; 2: bad
// arguments.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/args.h"
#include "common/clock.h"
#include "greyhound/config.h"
#include "greyhound/job.h"
#include "greyhound/ring.h"

namespace {

using json = nlohmann::json;

struct Options {
  int gemm_n = 8192;
  int repeats = 3;
  int device = 0;
  std::vector<std::uint64_t> sizes = {16ull << 20, 32ull << 20, 64ull << 20};
  std::string out;
  bool pause = true;
};

void usage() {
  std::printf(
      "usage: greyhound-gpu-check [--gemm-n N] [--sizes B,B,..] [--repeats N] [--device D] [--out FILE]\n"
      "                           [--no-pause]\n"
      "GEMM TFLOP/s (FP32, FP16; FP8 from compute capability 8.9) against the device's expected range, a\n"
      "single-GPU NCCL P2P self-test and, with libgreyhound.so preloaded, a one-rank validation pause;\n"
      "one JSON object on stdout or FILE.\n"
      "--gemm-n: 256..16384 (default 8192); --sizes: 1 to 4 byte counts, 1 B..4 GiB (default 16, 32, 64 MiB);\n"
      "--repeats: 1..9 (default 3); --no-pause: skip the pause even with the hook preloaded\n"
      "exit 0: all ran; 1: no usable GPU or a step failed; 2: bad arguments\n");
}

Options parse(int argc, char** argv, bool* help) {
  const greyhound::Args a(std::vector<std::string>(argv + 1, argv + argc), {"gemm-n", "sizes", "repeats", "device", "out"},
                          {"help", "no-pause"});
  Options o;
  *help = a.flag("help");
  o.gemm_n = static_cast<int>(a.integer_in("gemm-n", o.gemm_n, 256, 16384));
  o.repeats = static_cast<int>(a.integer_in("repeats", o.repeats, 1, 9));
  o.device = static_cast<int>(a.integer_in("device", 0, 0, 1024));
  o.out = a.str("out", "");
  o.pause = !a.flag("no-pause");
  if (a.has("sizes")) o.sizes = greyhound::byte_list(a.str("sizes"), "--sizes");
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Dense TFLOP/s a healthy device of this name reaches in these GEMMs (FP32 without TF32; FP16 and FP8
// tensor cores), from its data sheet less what cuBLAS typically leaves: [low, peak]; FP8 0: none on the
// device. FP8's low bounds allow for FP32 accumulation (no fast accumulation, as the hook runs it) and for
// the PCIe parts of a name (an H100 PCIe peaks at 1513 dense). Unknown names: none.
struct Expected {
  const char* name;
  double fp32_lo, fp32_hi, fp16_lo, fp16_hi, fp8_lo, fp8_hi;
};
constexpr Expected kExpected[] = {
    {"H200", 40, 67, 500, 990, 700, 1979}, {"H100", 40, 67, 500, 990, 700, 1979},
    {"H800", 40, 67, 500, 990, 700, 1979}, {"A100", 14, 19.5, 200, 312, 0, 0},
    {"A800", 14, 19.5, 200, 312, 0, 0},    {"L40S", 60, 91.6, 250, 362, 350, 733},
};

const Expected* expected_for(const std::string& device_name) {
  const Expected* exp = nullptr;
  for (const Expected& e : kExpected) {
    if (device_name.find(e.name) != std::string::npos) exp = &e;
  }
  return exp;
}

void judge(json& j, double tflops, double lo, double hi) {
  j["expected_tflops"] = {lo, hi};
  j["within_expected"] = tflops >= lo && tflops <= hi * 1.05;
}

#define CHECK_CUDA(x)                                                                                  \
  do {                                                                                                 \
    const cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(e_)); \
  } while (0)

json gemm_test(const Options& o, const std::string& device_name) {
  const std::size_t n = static_cast<std::size_t>(o.gemm_n);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc(&a, n * n * 4));
  CHECK_CUDA(cudaMalloc(&b, n * n * 4));
  CHECK_CUDA(cudaMalloc(&c, n * n * 4));
  CHECK_CUDA(cudaMemset(a, 0x3c, n * n * 4));
  CHECK_CUDA(cudaMemset(b, 0x3c, n * n * 4));
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  json out = json::object();
  const Expected* exp = expected_for(device_name);
  const struct {
    const char* name;
    cudaDataType t;
  } types[] = {{"fp32", CUDA_R_32F}, {"fp16", CUDA_R_16F}};
  for (const auto& t : types) {
    const float one = 1, zero = 0;
    const int N = o.gemm_n;
    std::vector<double> ms;
    for (int r = 0; r <= o.repeats; ++r) {
      CHECK_CUDA(cudaEventRecord(e0));
      if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, t.t, N, b, t.t, N, &zero, c, t.t, N,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        throw std::runtime_error(std::string("cublasGemmEx ") + t.name + " failed");
      }
      CHECK_CUDA(cudaEventRecord(e1));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float x = 0;
      CHECK_CUDA(cudaEventElapsedTime(&x, e0, e1));
      if (r > 0) ms.push_back(x);  // the first is the warm-up
    }
    const double m = median(ms);
    const double tflops = 2.0 * N * N * static_cast<double>(N) / (m * 1e-3) / 1e12;
    json j = {{"n", N}, {"ms", m}, {"runs_ms", ms}, {"tflops", tflops}};
    if (exp != nullptr) {
      judge(j, tflops, t.t == CUDA_R_32F ? exp->fp32_lo : exp->fp16_lo, t.t == CUDA_R_32F ? exp->fp32_hi : exp->fp16_hi);
    }
    out[t.name] = j;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return out;
}

#define CHECK_LT(x)                                                                                       \
  do {                                                                                                    \
    const cublasStatus_t s_ = (x);                                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(#x) + ": " + cublasLtGetStatusName(s_)); \
  } while (0)

// FP8 GEMM through cuBLASLt as the hook runs it in a pause (src/hook/pause_gate.cpp): D = A^T B, n x n x n
// (n rounded down to a multiple of 16), E4M3 in, BF16 out, FP32 compute, the heuristic's first algorithm
// with a 32 MiB workspace.
json fp8_gemm_test(const Options& o, const cudaDeviceProp& prop) {
  const int cc = prop.major * 10 + prop.minor;
  if (cc < 89) return {{"ran", false}, {"why", "compute capability " + std::to_string(prop.major) + "." +
                                                   std::to_string(prop.minor) + " (FP8 GEMMs need 8.9)"}};
  const std::uint64_t n = static_cast<std::uint64_t>(o.gemm_n) & ~15ull;
  void *a = nullptr, *b = nullptr, *d = nullptr, *ws = nullptr;
  std::size_t ws_bytes = 32u << 20;
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  struct Release {  // whatever was made, also when a step throws
    std::function<void()> fn;
    ~Release() { fn(); }
  } release{[&] {
    if (e0 != nullptr) cudaEventDestroy(e0);
    if (e1 != nullptr) cudaEventDestroy(e1);
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    for (auto l : {la, lb, ld}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    if (h != nullptr) cublasLtDestroy(h);
    for (void* p : {a, b, d, ws}) {
      if (p != nullptr) cudaFree(p);
    }
  }};
  CHECK_CUDA(cudaMalloc(&a, n * n));
  CHECK_CUDA(cudaMalloc(&b, n * n));
  CHECK_CUDA(cudaMalloc(&d, n * n * 2));
  CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  CHECK_CUDA(cudaMemset(a, 0x38, n * n));  // 1.0 in E4M3
  CHECK_CUDA(cudaMemset(b, 0x38, n * n));
  CHECK_LT(cublasLtCreate(&h));
  CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, static_cast<std::int64_t>(n)));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, static_cast<std::int64_t>(n)));
  CHECK_LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, static_cast<std::int64_t>(n)));
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &best, &found));
  if (found < 1) throw std::runtime_error("cuBLASLt offers no FP8 algorithm on a device of compute capability " + std::to_string(cc));
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const float one = 1, zero = 0;
  std::vector<double> ms;
  for (int r = 0; r <= o.repeats; ++r) {
    CHECK_CUDA(cudaEventRecord(e0));
    CHECK_LT(cublasLtMatmul(h, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &best.algo, ws, ws_bytes, nullptr));
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float x = 0;
    CHECK_CUDA(cudaEventElapsedTime(&x, e0, e1));
    if (r > 0) ms.push_back(x);  // the first is the warm-up
  }
  // Every element of D is n (a sum of n ones), within BF16's rounding (8 significant bits).
  std::uint16_t first = 0;
  CHECK_CUDA(cudaMemcpy(&first, d, sizeof first, cudaMemcpyDeviceToHost));
  std::uint32_t bits = static_cast<std::uint32_t>(first) << 16;
  float d0 = 0;
  std::memcpy(&d0, &bits, sizeof d0);
  const double m = median(ms);
  const double tflops = 2.0 * static_cast<double>(n) * n * n / (m * 1e-3) / 1e12;
  const bool correct = std::abs(d0 - static_cast<double>(n)) <= static_cast<double>(n) / 256;
  json j = {{"ran", true}, {"n", n}, {"ms", m}, {"runs_ms", ms}, {"tflops", tflops}, {"d00", d0},
            {"d00_expected", static_cast<double>(n)}, {"correct", correct}};
  if (const Expected* exp = expected_for(prop.name); exp != nullptr && exp->fp8_hi > 0) judge(j, tflops, exp->fp8_lo, exp->fp8_hi);
  return j;
}

json p2p_self_test(const Options& o, ncclComm_t comm) {
  std::uint64_t max_bytes = 0;
  for (auto s : o.sizes) max_bytes = std::max(max_bytes, s);
  void *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, max_bytes));
  CHECK_CUDA(cudaMalloc(&dst, max_bytes));
  std::vector<unsigned char> pattern(max_bytes), back(max_bytes);
  for (std::size_t i = 0; i < max_bytes; ++i) pattern[i] = static_cast<unsigned char>(i * 131 + 7);
  CHECK_CUDA(cudaMemcpy(src, pattern.data(), max_bytes, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  json sizes = json::array();
  bool intact = true;
  for (std::uint64_t bytes : o.sizes) {
    std::vector<double> ms;
    for (int r = 0; r <= o.repeats; ++r) {
      CHECK_CUDA(cudaMemset(dst, 0, bytes));
      CHECK_CUDA(cudaEventRecord(e0, s));
      if (ncclGroupStart() != ncclSuccess || ncclSend(src, bytes, ncclInt8, 0, comm, s) != ncclSuccess ||
          ncclRecv(dst, bytes, ncclInt8, 0, comm, s) != ncclSuccess || ncclGroupEnd() != ncclSuccess) {
        throw std::runtime_error("ncclSend/ncclRecv to itself failed");
      }
      CHECK_CUDA(cudaEventRecord(e1, s));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float x = 0;
      CHECK_CUDA(cudaEventElapsedTime(&x, e0, e1));
      if (r > 0) ms.push_back(x);
    }
    CHECK_CUDA(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost));
    const bool ok = std::memcmp(back.data(), pattern.data(), bytes) == 0;
    intact = intact && ok;
    const double m = median(ms);
    sizes.push_back({{"bytes", bytes}, {"ms", m}, {"gb_per_s", m > 0 ? bytes / (m * 1e-3) / 1e9 : 0}, {"intact", ok}});
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(s);
  cudaFree(src);
  cudaFree(dst);
  return {{"sizes", sizes}, {"intact", intact}};
}

// This process's ring (the hook made it at the first NCCL call), writable; nullptr without the hook.
std::unique_ptr<greyhound::RingReader> own_ring() {
  const greyhound::EnvConfig env = greyhound::read_env_config();
  return greyhound::open_process_ring(env.shm_dir, greyhound::sanitize_job_name(env.job), getpid());
}

bool wait_state(greyhound::PauseControl* pc, std::uint64_t id, std::uint32_t state, double max_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_s);
  while (std::chrono::steady_clock::now() < until) {
    if (pc->state.load() == state && pc->state_id.load() == id) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

json pause_test(const Options& o, ncclComm_t comm) {
  auto ring = own_ring();
  if (!ring) return {{"ran", false}, {"why", "libgreyhound.so is not preloaded (no ring of this process)"}};
  std::string err;
  greyhound::PauseControl* pc = ring->pause(&err);
  if (pc == nullptr) return {{"ran", false}, {"why", err}};
  float* x = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&x), 1024 * sizeof(float)));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  const std::uint64_t id = 0x67707563686b0001ull;  // "gpuchk" 1
  pc->id.store(0);
  pc->command.store(greyhound::kPauseCmdArm);
  pc->at_iteration = 2;
  pc->deadline_ns = greyhound::clock_ns(CLOCK_MONOTONIC) + 60'000'000'000ull;
  pc->gemm_n = static_cast<std::uint32_t>(o.gemm_n);
  pc->repeats = static_cast<std::uint32_t>(o.repeats);
  pc->n_sizes = 0;
  pc->n_transfers = 0;
  pc->id.store(id, std::memory_order_release);
  json result = {{"ran", true}};
  std::string failure;
  std::thread agent([&] {
    if (!wait_state(pc, id, greyhound::kPauseTrapped, 30)) { failure = "never trapped"; return; }
    result["trapped_at_mark"] = pc->iteration_mark.load();
    result["drain_ms"] = pc->drain_ms;
    pc->command.store(greyhound::kPauseCmdRun, std::memory_order_release);
    if (!wait_state(pc, id, greyhound::kPauseDone, 50)) { failure = "no results"; return; }
    pc->command.store(greyhound::kPauseCmdResume, std::memory_order_release);
  });
  for (int it = 0; it < 5; ++it) {
    greyhound_job_mark_iteration_v1(it);
    if (ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, comm, s) != ncclSuccess) failure = "ncclAllReduce failed";
    CHECK_CUDA(cudaStreamSynchronize(s));
  }
  agent.join();
  cudaStreamDestroy(s);
  cudaFree(x);
  result["state"] = pc->state.load();
  result["reason"] = pc->reason;
  result["paused_ms"] = pc->resumed_ns > pc->trapped_ns ? (pc->resumed_ns - pc->trapped_ns) * 1e-6 : 0.0;
  result["gemm_ms"] = {pc->gemm_ms[0], pc->gemm_ms[1]};
  result["gemm_tflops"] = {pc->gemm_tflops[0], pc->gemm_tflops[1]};
  const greyhound::PauseGemmFp8& fp8 = greyhound::pause_fp8_of(*pc);
  result["fp8"] = {{"id_matches", fp8.id == id}, {"status", fp8.status}, {"n", fp8.n},
                   {"compute_capability", fp8.compute_capability}, {"ms", fp8.ms}, {"tflops", fp8.tflops}};
  // The hook ran the FP8 GEMM where the device has it, and said why not elsewhere.
  const bool fp8_ok = fp8.id == id && (fp8.compute_capability >= 89 ? fp8.status == greyhound::kGemmFp8Done && fp8.ms > 0
                                                                      : fp8.status == greyhound::kGemmFp8Unsupported);
  const bool ok = failure.empty() && result.value("trapped_at_mark", 0) == 3 &&
                  pc->state.load() == greyhound::kPauseResumed && pc->reason == greyhound::kPauseWhyTold &&
                  pc->gemm_ms[0] > 0 && pc->gemm_ms[1] > 0 && fp8_ok;
  result["ok"] = ok;
  if (!failure.empty()) result["why"] = failure;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    bool help = false;
    o = parse(argc, argv, &help);
    if (help) {
      usage();
      return 0;
    }
  } catch (const greyhound::ArgError& e) {
    std::fprintf(stderr, "greyhound-gpu-check: %s\n", e.what());
    return 2;
  }
  json report = {{"tool", "greyhound-gpu-check"}};
  int rc = 0;
  try {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= o.device) {
      std::fprintf(stderr, "greyhound-gpu-check: no usable CUDA device %d (%s)\n", o.device,
                   e != cudaSuccess ? cudaGetErrorString(e) : (std::to_string(count) + " devices").c_str());
      return 1;
    }
    CHECK_CUDA(cudaSetDevice(o.device));
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, o.device));
    report["device"] = {{"index", o.device}, {"name", prop.name}, {"sms", prop.multiProcessorCount},
                        {"memory_gib", prop.totalGlobalMem / double(1ull << 30)}, {"cc", std::to_string(prop.major) + "." + std::to_string(prop.minor)}};
    report["gemm"] = gemm_test(o, prop.name);
    try {
      report["gemm"]["fp8"] = fp8_gemm_test(o, prop);
      if (report["gemm"]["fp8"].value("ran", false) && !report["gemm"]["fp8"].value("correct", false)) rc = 1;
    } catch (const std::exception& ex) {  // the other steps still run
      report["gemm"]["fp8"] = {{"ran", false}, {"error", ex.what()}};
      rc = 1;
    }
    ncclComm_t comm = nullptr;
    int dev = o.device;
    if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) throw std::runtime_error("ncclCommInitAll failed");
    report["p2p_self"] = p2p_self_test(o, comm);
    if (!report["p2p_self"]["intact"].get<bool>()) rc = 1;
    if (o.pause) {
      report["pause"] = pause_test(o, comm);
      if (report["pause"].value("ran", false) && !report["pause"].value("ok", false)) rc = 1;
    }
    ncclCommDestroy(comm);
  } catch (const std::exception& ex) {
    report["error"] = ex.what();
    rc = 1;
  }
  report["exit"] = rc;
  if (o.out.empty()) {
    std::cout << report.dump(1) << "\n";
  } else {
    std::ofstream(o.out) << report.dump(1) << "\n";
  }
  return rc;
}
