// One rank of a multi-process scenario against the NCCL/CUDA/cuBLAS stand-ins (tests/sim/collectives_test).
// usage: greyhound_sim_worker <scenario> <rank> <nranks> <rendezvous dir>
// Exits 0 when every check of the scenario holds; otherwise prints what failed and exits 1.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sim/reduce.h"

namespace {

int g_rank = 0, g_n = 0;
int g_failures = 0;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "rank %d: check failed (line %d): %s: ", g_rank, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fputc('\n', stderr);                                           \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)

#define NCCL_OK(expr)                                                                       \
  do {                                                                                      \
    const ncclResult_t r_ = (expr);                                                         \
    if (r_ != ncclSuccess) {                                                                \
      std::fprintf(stderr, "rank %d: %s -> %s\n", g_rank, #expr, ncclGetErrorString(r_));   \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ncclComm_t world(const std::string& dir) {
  const std::string path = dir + "/world.id";
  ncclUniqueId id{};
  if (g_rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    {
      std::ofstream out(path + ".tmp", std::ios::binary);
      out.write(id.internal, sizeof id.internal);
    }
    std::rename((path + ".tmp").c_str(), path.c_str());
  } else {
    for (int i = 0; i < 30000; ++i) {
      std::ifstream in(path, std::ios::binary);
      if (in && in.read(id.internal, sizeof id.internal)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ncclComm_t c = nullptr;
  NCCL_OK(ncclCommInitRank(&c, g_n, id, g_rank));
  return c;
}

// Input element i of rank r: small integers, exact in every datatype.
double in_value(int r, std::size_t i) { return static_cast<double>((r * 7 + static_cast<int>(i % 13)) % 11 + 1); }

template <typename T>
std::vector<T> make(std::size_t n, int r) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(in_value(r, i));
  return v;
}

double expected_reduce(int op, std::size_t i, bool integer) {
  double acc = in_value(0, i);
  for (int r = 1; r < g_n; ++r) {
    const double x = in_value(r, i);
    switch (op) {
      case ncclSum: case ncclAvg: acc += x; break;
      case ncclProd: acc *= x; break;
      case ncclMax: acc = std::max(acc, x); break;
      case ncclMin: acc = std::min(acc, x); break;
    }
  }
  if (op == ncclAvg) acc = integer ? std::trunc(acc / g_n) : acc / g_n;
  return acc;
}

template <typename T>
void allreduce_typed(ncclComm_t c, ncclDataType_t dt, std::size_t count, bool in_place) {
  const bool integer = dt == ncclInt32 || dt == ncclInt64;
  for (int op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
    std::vector<T> send = make<T>(count, g_rank), recv(count);
    T* out = in_place ? send.data() : recv.data();
    NCCL_OK(ncclAllReduce(send.data(), out, count, dt, static_cast<ncclRedOp_t>(op), c, nullptr));
    for (std::size_t i = 0; i < count; i += 97) {
      const double want = expected_reduce(op, i, integer);
      // Exact for sums/products of small integers; an average rounds once, like the kernel's division.
      CHECK(out[i] == static_cast<T>(want), "dtype %d op %d i %zu: %.9g != %.9g", static_cast<int>(dt), op, i,
            static_cast<double>(out[i]), want);
    }
  }
}

// 16-bit floats: compare after converting; products of up to n small integers stay exact only for few
// ranks, so only sum/max/min are checked.
void allreduce_16(ncclComm_t c, ncclDataType_t dt) {
  using greyhound::sim::bf16_to_float;
  using greyhound::sim::float_to_bf16;
  using greyhound::sim::float_to_half;
  using greyhound::sim::half_to_float;
  const std::size_t count = 1000;
  for (int op : {ncclSum, ncclMax, ncclMin}) {
    std::vector<std::uint16_t> send(count), recv(count);
    for (std::size_t i = 0; i < count; ++i) {
      const float v = static_cast<float>(in_value(g_rank, i));
      send[i] = dt == ncclFloat16 ? float_to_half(v) : float_to_bf16(v);
    }
    NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, dt, static_cast<ncclRedOp_t>(op), c, nullptr));
    for (std::size_t i = 0; i < count; ++i) {
      const float got = dt == ncclFloat16 ? half_to_float(recv[i]) : bf16_to_float(recv[i]);
      CHECK(got == static_cast<float>(expected_reduce(op, i, false)), "16-bit dtype %d op %d i %zu", static_cast<int>(dt), op, i);
    }
  }
}

int scenario_collectives(const std::string& dir) {
  ncclComm_t c = world(dir);
  int n = 0, r = 0;
  NCCL_OK(ncclCommCount(c, &n));
  NCCL_OK(ncclCommUserRank(c, &r));
  CHECK(n == g_n && r == g_rank, "count %d rank %d", n, r);

  allreduce_typed<float>(c, ncclFloat32, 1000, false);
  allreduce_typed<double>(c, ncclFloat64, 1000, true);
  allreduce_typed<std::int32_t>(c, ncclInt32, 1000, false);
  allreduce_typed<std::int64_t>(c, ncclInt64, 1000, true);
  allreduce_16(c, ncclFloat16);
  allreduce_16(c, ncclBfloat16);
  allreduce_typed<float>(c, ncclFloat32, 200'003, true);  // several staging rounds, odd tail

  const std::size_t k = 70'001;  // per rank; several rounds for the per-peer ops
  {  // AllGather, in place (sendbuff inside recvbuff, as NCCL allows)
    std::vector<float> buf(k * g_n, -1.0f);
    const auto mine = make<float>(k, g_rank);
    std::copy(mine.begin(), mine.end(), buf.begin() + static_cast<std::ptrdiff_t>(k * g_rank));
    NCCL_OK(ncclAllGather(buf.data() + k * g_rank, buf.data(), k, ncclFloat32, c, nullptr));
    for (int q = 0; q < g_n; ++q) {
      for (std::size_t i = 0; i < k; i += 101) {
        CHECK(buf[q * k + i] == static_cast<float>(in_value(q, i)), "AllGather q %d i %zu", q, i);
      }
    }
  }
  {  // ReduceScatter: block q of every rank's input is summed into rank q
    std::vector<float> send(k * g_n), recv(k);
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(in_value(g_rank, i));
    NCCL_OK(ncclReduceScatter(send.data(), recv.data(), k, ncclFloat32, ncclSum, c, nullptr));
    for (std::size_t i = 0; i < k; i += 101) {
      double want = 0;
      for (int q = 0; q < g_n; ++q) want += in_value(q, g_rank * k + i);
      CHECK(recv[i] == static_cast<float>(want), "ReduceScatter i %zu: %g != %g", i, recv[i], want);
    }
  }
  {  // Broadcast from 1, Bcast from the last rank, Reduce(max) to 0
    std::vector<std::int32_t> b = make<std::int32_t>(5000, g_rank), out(5000);
    NCCL_OK(ncclBroadcast(b.data(), out.data(), 5000, ncclInt32, 1 % g_n, c, nullptr));
    for (std::size_t i = 0; i < 5000; i += 7) CHECK(out[i] == in_value(1 % g_n, i), "Broadcast i %zu", i);
    NCCL_OK(ncclBcast(b.data(), 5000, ncclInt32, g_n - 1, c, nullptr));
    for (std::size_t i = 0; i < 5000; i += 7) CHECK(b[i] == in_value(g_n - 1, i), "Bcast i %zu", i);
    std::vector<double> x = make<double>(3000, g_rank), y(3000, -1);
    NCCL_OK(ncclReduce(x.data(), y.data(), 3000, ncclFloat64, ncclMax, 0, c, nullptr));
    for (std::size_t i = 0; i < 3000; i += 7) {
      CHECK(y[i] == (g_rank == 0 ? expected_reduce(ncclMax, i, false) : -1.0), "Reduce i %zu", i);
    }
  }
  {  // AlltoAll, Gather to the last rank, Scatter from 0
    const std::size_t m = 40'000;
    std::vector<float> send(m * g_n), recv(m * g_n);
    for (int q = 0; q < g_n; ++q) {
      for (std::size_t i = 0; i < m; ++i) send[q * m + i] = static_cast<float>(g_rank * 1000 + q * 10 + i % 7);
    }
    NCCL_OK(ncclAlltoAll(send.data(), recv.data(), m, ncclFloat32, c, nullptr));
    for (int q = 0; q < g_n; ++q) {
      for (std::size_t i = 0; i < m; i += 113) {
        CHECK(recv[q * m + i] == static_cast<float>(q * 1000 + g_rank * 10 + i % 7), "AlltoAll q %d i %zu", q, i);
      }
    }
    std::vector<float> g(m * g_n, -1);
    NCCL_OK(ncclGather(send.data(), g.data(), m, ncclFloat32, g_n - 1, c, nullptr));
    if (g_rank == g_n - 1) {
      for (int q = 0; q < g_n; ++q) CHECK(g[q * m + 5] == static_cast<float>(q * 1000 + 5), "Gather q %d", q);
    }
    std::vector<float> s(m, -1);
    NCCL_OK(ncclScatter(send.data(), s.data(), m, ncclFloat32, 0, c, nullptr));
    CHECK(s[5] == static_cast<float>(0 * 1000 + g_rank * 10 + 5), "Scatter %g", s[5]);
  }
  {  // a collective inside a group runs at GroupEnd
    float v = static_cast<float>(g_rank + 1), w = 0;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(&v, &w, 1, ncclFloat32, ncclSum, c, nullptr));
    NCCL_OK(ncclGroupEnd());
    CHECK(w == static_cast<float>(g_n * (g_n + 1) / 2), "grouped AllReduce %g", w);
  }
  NCCL_OK(ncclCommDestroy(c));
  return g_failures == 0 ? 0 : 1;
}

int scenario_p2p(const std::string& dir) {
  ncclComm_t c = world(dir);
  const int next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{300'000}}) {  // 1.2 MB > a channel
    std::vector<float> send(count), recv(count, -1);
    for (std::size_t i = 0; i < count; ++i) send[i] = static_cast<float>(g_rank * 100000 + i % 9973);
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(send.data(), count, ncclFloat32, next, c, nullptr));
    NCCL_OK(ncclRecv(recv.data(), count, ncclFloat32, prev, c, nullptr));
    NCCL_OK(ncclGroupEnd());
    for (std::size_t i = 0; i < count; i += 997) {
      CHECK(recv[i] == static_cast<float>(prev * 100000 + i % 9973), "ring count %zu i %zu", count, i);
    }
  }
  // Several messages to one peer in one group keep their order; ungrouped matched pairs work too.
  if (g_n >= 2 && g_rank < 2) {
    const int peer = 1 - g_rank;
    std::vector<int> a(10, g_rank), b(10, 10 + g_rank), ra(10), rb(10);
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(a.data(), 10, ncclInt32, peer, c, nullptr));
    NCCL_OK(ncclSend(b.data(), 10, ncclInt32, peer, c, nullptr));
    NCCL_OK(ncclRecv(ra.data(), 10, ncclInt32, peer, c, nullptr));
    NCCL_OK(ncclRecv(rb.data(), 10, ncclInt32, peer, c, nullptr));
    NCCL_OK(ncclGroupEnd());
    CHECK(ra[3] == peer && rb[3] == 10 + peer, "ordered messages %d %d", ra[3], rb[3]);
    std::vector<double> x(50'000, g_rank + 0.5), y(50'000);
    if (g_rank == 0) {
      NCCL_OK(ncclSend(x.data(), x.size(), ncclFloat64, 1, c, nullptr));
      NCCL_OK(ncclRecv(y.data(), y.size(), ncclFloat64, 1, c, nullptr));
    } else {
      NCCL_OK(ncclRecv(y.data(), y.size(), ncclFloat64, 0, c, nullptr));
      NCCL_OK(ncclSend(x.data(), x.size(), ncclFloat64, 0, c, nullptr));
    }
    CHECK(y[49'999] == peer + 0.5, "ungrouped pair %g", y[49'999]);
  }
  NCCL_OK(ncclCommDestroy(c));
  return g_failures == 0 ? 0 : 1;
}

int scenario_split(const std::string& dir) {
  ncclComm_t c = world(dir);
  // Colour by parity; the last rank opts out; key reverses the order inside each colour.
  const bool out = g_rank == g_n - 1;
  ncclComm_t sub = nullptr;
  NCCL_OK(ncclCommSplit(c, out ? NCCL_SPLIT_NOCOLOR : g_rank % 2, -g_rank, &sub, nullptr));
  if (out) {
    CHECK(sub == nullptr, "NOCOLOR gave a communicator");
  } else {
    int n = 0, r = 0;
    NCCL_OK(ncclCommCount(sub, &n));
    NCCL_OK(ncclCommUserRank(sub, &r));
    std::vector<int> members;
    for (int q = 0; q < g_n - 1; ++q) {
      if (q % 2 == g_rank % 2) members.push_back(q);
    }
    CHECK(n == static_cast<int>(members.size()), "size %d", n);
    int expect_rank = 0;  // keys are -rank: higher parent ranks first
    for (int q : members) expect_rank += q > g_rank;
    CHECK(r == expect_rank, "rank %d want %d", r, expect_rank);
    int v = g_rank, s = 0;
    NCCL_OK(ncclAllReduce(&v, &s, 1, ncclInt32, ncclSum, sub, nullptr));
    int want = 0;
    for (int q : members) want += q;
    CHECK(s == want, "sub AllReduce %d want %d", s, want);
    NCCL_OK(ncclCommDestroy(sub));
  }
  int one = 1, total = 0;
  NCCL_OK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, c, nullptr));  // the parent still works
  CHECK(total == g_n, "parent %d", total);
  NCCL_OK(ncclCommDestroy(c));
  return g_failures == 0 ? 0 : 1;
}

// Rank 0 arrives 300 ms late: everyone leaves the AllReduce no earlier than its arrival plus the modeled
// duration. Prints "<enter_s> <leave_s>" for the test to compare across ranks.
int scenario_late_rank(const std::string& dir) {
  ncclComm_t c = world(dir);
  std::vector<float> buf(1 << 16, 1.0f);
  NCCL_OK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, c, nullptr));  // align
  if (g_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double t0 = now_s();
  NCCL_OK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, c, nullptr));
  const double t1 = now_s();
  std::printf("%.6f %.6f\n", t0, t1);
  NCCL_OK(ncclCommDestroy(c));
  return 0;
}

// GEMM duration under a GPU fault on rank 1 (schedule from the environment): prints the seconds taken.
int scenario_gemm(const std::string&) {
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  const int n = 64;
  std::vector<float> a(n * n, 1.0f), b(n * n, 2.0f), cm(n * n, 0.0f);
  float *da, *db, *dc;
  cudaMalloc(reinterpret_cast<void**>(&da), a.size() * 4);
  cudaMalloc(reinterpret_cast<void**>(&db), b.size() * 4);
  cudaMalloc(reinterpret_cast<void**>(&dc), cm.size() * 4);
  cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const float one = 1, zero = 0;
  cudaEventRecord(e0, nullptr);
  if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, da, n, db, n, &zero, dc, n) != CUBLAS_STATUS_SUCCESS) return 1;
  cudaEventRecord(e1, nullptr);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaMemcpy(cm.data(), dc, cm.size() * 4, cudaMemcpyDeviceToHost);
  CHECK(cm[0] == 2.0f * n && cm[n * n - 1] == 2.0f * n, "GEMM result %g", cm[0]);
  std::printf("%.6f\n", ms * 1e-3);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cublasDestroy(h);
  return g_failures == 0 ? 0 : 1;
}

// Ranks disagree on the count: all must get ncclInvalidUsage, none may hang.
int scenario_mismatch(const std::string& dir) {
  ncclComm_t c = world(dir);
  std::vector<float> buf(100, 1.0f);
  const ncclResult_t rc = ncclAllReduce(buf.data(), buf.data(), g_rank == 0 ? 10 : 20, ncclFloat32, ncclSum, c, nullptr);
  CHECK(rc == ncclInvalidUsage, "got %d", static_cast<int>(rc));
  NCCL_OK(ncclCommAbort(c));
  return g_failures == 0 ? 0 : 1;
}

// The last rank exits after joining: the others' AllReduce fails with ncclRemoteError well before the
// (long) timeout.
int scenario_dead_peer(const std::string& dir) {
  ncclComm_t c = world(dir);
  if (g_rank == g_n - 1) std::_Exit(0);
  float v = 1;
  const double t0 = now_s();
  const ncclResult_t rc = ncclAllReduce(&v, &v, 1, ncclFloat32, ncclSum, c, nullptr);
  CHECK(rc == ncclRemoteError, "got %d", static_cast<int>(rc));
  CHECK(now_s() - t0 < 10.0, "took %.1f s", now_s() - t0);
  NCCL_OK(ncclCommAbort(c));
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: greyhound_sim_worker <scenario> <rank> <nranks> <dir>\n");
    return 2;
  }
  const std::string scenario = argv[1];
  g_rank = std::atoi(argv[2]);
  g_n = std::atoi(argv[3]);
  const std::string dir = argv[4];
  if (scenario == "collectives") return scenario_collectives(dir);
  if (scenario == "p2p") return scenario_p2p(dir);
  if (scenario == "split") return scenario_split(dir);
  if (scenario == "late_rank") return scenario_late_rank(dir);
  if (scenario == "gemm") return scenario_gemm(dir);
  if (scenario == "mismatch") return scenario_mismatch(dir);
  if (scenario == "dead_peer") return scenario_dead_peer(dir);
  std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
  return 2;
}
