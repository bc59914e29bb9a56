// libnccl.so.2 CPU stand-in: the NCCL subset real training jobs use, with real data semantics across the
// processes of one machine and the timing model of sim_model.h.
//
// Each communicator is a shared-memory segment <GREYHOUND_SIM_DIR>/ghsim.<key> (key from the unique id,
// or derived from the parent for CommSplit/CommShrink) holding a barrier, one info slot per rank, one
// staging area per rank (collectives move data through it in rounds) and one byte channel per ordered
// pair of ranks (Send/Recv). Calls block like NCCL with synchronous streams: a collective returns when its
// modeled end time has passed; the modeled start is the arrival of the last rank, so a late rank makes the
// others wait, as on hardware. Every wait is a futex sleep with a deadline (GREYHOUND_SIM_TIMEOUT_S);
// a peer process that died turns into ncclRemoteError instead of a hang.
//
// Not supported (ncclInvalidUsage, with a message): ncclCommInitAll (one process driving several
// devices), custom reduction operators, fp8 reductions, ncclGroupSimulateEnd, window registration.
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "greyhound/hash.h"
#include "greyhound/ops.h"
#include "sim/reduce.h"
#include "sim/shm_sync.h"
#include "sim/sim_model.h"
#include "sim/sim_process.h"

namespace gs = greyhound::sim;
using greyhound::kGoldenGamma;
using greyhound::mix64;
using greyhound::Op;

namespace {

constexpr std::uint64_t kIdMagic = 0x31764d4953484721ull;  // "!GHSIMv1"
constexpr std::size_t kStagingBytes = 256 * 1024;          // per rank
constexpr std::size_t kChannelBytes = 128 * 1024;          // per ordered pair
constexpr std::size_t kAckSlots = 64;
constexpr std::size_t kHeaderBytes = 4096;

struct SegmentHeader {
  alignas(64) std::atomic<std::uint32_t> joined;  // futex: ranks attached
  std::atomic<std::uint32_t> left;                // ranks detached
  alignas(64) std::atomic<std::uint32_t> bar_arrived;
  alignas(64) std::atomic<std::uint32_t> bar_gen;  // futex
};
static_assert(sizeof(SegmentHeader) <= kHeaderBytes);

// One per rank. Written by its rank before a barrier, read by all after it.
struct alignas(64) RankInfo {
  std::atomic<std::uint32_t> present;
  std::int32_t global_rank;
  std::int32_t node;
  std::int32_t pid;
  std::uint64_t arrive_ns;  // arrival at the current collective
  std::int32_t op;          // descriptor of the current collective, checked across ranks
  std::int32_t dtype;
  std::int32_t redop;
  std::int32_t root;
  std::uint64_t count;
  std::int32_t split_color;
  std::int32_t split_key;
};

struct alignas(64) Doorbell {
  std::atomic<std::uint32_t> word;  // futex: bumped whenever a channel this rank uses changes
};

struct Channel {  // single producer (src), single consumer (dst)
  alignas(64) std::atomic<std::uint64_t> head;  // bytes written
  alignas(64) std::atomic<std::uint64_t> tail;  // bytes consumed
  alignas(64) std::atomic<std::uint64_t> acks;  // messages whose header the receiver has read
  std::uint64_t ack_end_ns[kAckSlots];          // modeled end time of message k at [k % kAckSlots]
  alignas(64) unsigned char data[kChannelBytes];
};

struct MessageHeader {
  std::uint64_t bytes;
  std::uint64_t arrive_ns;
  std::uint64_t index;
  std::uint64_t magic;
};

std::size_t segment_bytes(int n) {
  const auto un = static_cast<std::size_t>(n);
  return kHeaderBytes + un * sizeof(RankInfo) + un * sizeof(Doorbell) + un * kStagingBytes +
         un * un * sizeof(Channel);
}

thread_local char t_last_error[512] = "";

void set_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void set_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
  va_end(ap);
  gs::sim_log("%s", t_last_error);
}

}  // namespace

// The opaque ncclComm of nccl.h, defined by this stand-in.
struct ncclComm {
  std::string path;
  unsigned char* base = nullptr;
  std::size_t bytes = 0;
  std::uint64_t key = 0;
  int rank = 0;
  int nranks = 1;
  std::uint32_t splits = 0;
  std::vector<int> nodes;  // node of each member, in communicator-rank order
  std::vector<int> pids;
  std::vector<std::uint64_t> sent;      // messages fully written to each peer
  std::vector<std::uint64_t> received;  // messages fully read from each peer
  std::vector<std::uint64_t> send_seq;  // next message index to each peer (assigned at enqueue)
  std::vector<std::uint64_t> recv_seq;
  bool detached = false;

  SegmentHeader* header() { return reinterpret_cast<SegmentHeader*>(base); }
  RankInfo* info(int r) {
    return reinterpret_cast<RankInfo*>(base + kHeaderBytes) + r;
  }
  Doorbell* doorbell(int r) {
    return reinterpret_cast<Doorbell*>(base + kHeaderBytes + static_cast<std::size_t>(nranks) * sizeof(RankInfo)) + r;
  }
  unsigned char* staging(int r) {
    return base + kHeaderBytes + static_cast<std::size_t>(nranks) * (sizeof(RankInfo) + sizeof(Doorbell)) +
           static_cast<std::size_t>(r) * kStagingBytes;
  }
  Channel* channel(int from, int to) {
    unsigned char* first = staging(0) + static_cast<std::size_t>(nranks) * kStagingBytes;
    return reinterpret_cast<Channel*>(first) + static_cast<std::size_t>(from) * nranks + to;
  }
};

namespace {

std::uint64_t deadline() {
  return gs::now_ns() + gs::seconds_to_ns(gs::sim_process().timeout_s);
}

// A member process that no longer exists: its peers must not wait for it until the deadline.
int dead_peer(ncclComm* c) {
  for (int r = 0; r < c->nranks; ++r) {
    const int pid = c->pids.empty() ? c->info(r)->pid : c->pids[static_cast<std::size_t>(r)];
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) return r;
  }
  return -1;
}

// Waits for `ready()` with futex sleeps on `word`; ncclSuccess, or an error on deadline or a dead peer.
template <typename Ready>
ncclResult_t wait_for(ncclComm* c, std::atomic<std::uint32_t>* word, Ready ready, const char* what) {
  const std::uint64_t end = deadline();
  std::uint64_t next_liveness = gs::now_ns() + 500'000'000ull;
  for (;;) {
    const std::uint32_t seen = word->load(std::memory_order_acquire);
    if (ready()) return ncclSuccess;
    const std::uint64_t now = gs::now_ns();
    if (now >= end) {
      set_error("timed out after %.0f s waiting for peers in %s (communicator of %d ranks, rank %d)",
                gs::sim_process().timeout_s, what, c->nranks, c->rank);
      return ncclSystemError;
    }
    if (now >= next_liveness) {
      next_liveness = now + 500'000'000ull;
      if (const int r = dead_peer(c); r >= 0) {
        set_error("peer rank %d of the communicator exited during %s", r, what);
        return ncclRemoteError;
      }
    }
    gs::futex_wait(word, seen, end);
  }
}

ncclResult_t barrier(ncclComm* c, const char* what) {
  SegmentHeader* h = c->header();
  const std::uint32_t gen = h->bar_gen.load(std::memory_order_acquire);
  if (h->bar_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(c->nranks)) {
    h->bar_arrived.store(0, std::memory_order_relaxed);
    h->bar_gen.fetch_add(1, std::memory_order_release);
    gs::futex_wake_all(&h->bar_gen);
    return ncclSuccess;
  }
  return wait_for(c, &h->bar_gen, [&] { return h->bar_gen.load(std::memory_order_acquire) != gen; }, what);
}

std::string segment_path(std::uint64_t key) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "ghsim.%016llx", static_cast<unsigned long long>(key));
  return gs::sim_process().dir + "/" + buf;
}

// Attaches this process as `rank` of the `nranks`-member communicator named by `key`; waits for all.
void write_nccl_dumps(ncclComm* c);

ncclResult_t attach(ncclComm_t* out, std::uint64_t key, int nranks, int rank) {
  if (out == nullptr || nranks < 1 || rank < 0 || rank >= nranks || nranks > 4096) {
    set_error("invalid communicator arguments (nranks %d, rank %d)", nranks, rank);
    return ncclInvalidArgument;
  }
  auto* c = new ncclComm();
  c->key = key;
  c->rank = rank;
  c->nranks = nranks;
  c->path = segment_path(key);
  c->bytes = segment_bytes(nranks);
  const int fd = ::open(c->path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 ||
      (static_cast<std::size_t>(st.st_size) < c->bytes && ftruncate(fd, static_cast<off_t>(c->bytes)) != 0)) {
    set_error("cannot create communicator segment %s: %s", c->path.c_str(), std::strerror(errno));
    if (fd >= 0) ::close(fd);
    delete c;
    return ncclSystemError;
  }
  void* m = mmap(nullptr, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) {
    set_error("cannot map communicator segment %s: %s", c->path.c_str(), std::strerror(errno));
    delete c;
    return ncclSystemError;
  }
  c->base = static_cast<unsigned char*>(m);
  const gs::SimProcess& sp = gs::sim_process();
  RankInfo* me = c->info(rank);
  std::uint32_t expected = 0;
  if (!me->present.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    set_error("rank %d of communicator %s joined twice", rank, c->path.c_str());
    munmap(c->base, c->bytes);
    delete c;
    return ncclInvalidUsage;
  }
  me->global_rank = sp.rank;
  me->node = sp.node;
  me->pid = static_cast<std::int32_t>(getpid());
  SegmentHeader* h = c->header();
  h->joined.fetch_add(1, std::memory_order_acq_rel);
  gs::futex_wake_all(&h->joined);
  const ncclResult_t rc = wait_for(c, &h->joined, [&] {
    return h->joined.load(std::memory_order_acquire) >= static_cast<std::uint32_t>(nranks);
  }, "communicator initialisation");
  if (rc != ncclSuccess) {
    munmap(c->base, c->bytes);
    delete c;
    return rc;
  }
  const auto un = static_cast<std::size_t>(nranks);
  c->nodes.resize(un);
  c->pids.resize(un);
  for (int r = 0; r < nranks; ++r) {
    c->nodes[static_cast<std::size_t>(r)] = c->info(r)->node;
    c->pids[static_cast<std::size_t>(r)] = c->info(r)->pid;
  }
  c->sent.assign(un, 0);
  c->received.assign(un, 0);
  c->send_seq.assign(un, 0);
  c->recv_seq.assign(un, 0);
  write_nccl_dumps(c);
  *out = c;
  return ncclSuccess;
}

// NCCL's dumps as NCCL writes them (src/graph/xml.cc, search.cc; include/greyhound/validate/graph_dump.h), on
// the rank NCCL_GRAPH_DUMP_FILE_RANK / NCCL_TOPO_DUMP_FILE_RANK names (default 0), at the path the variable
// names, for every communicator made: the topology of this rank's node (each of its GPUs of the communicator:
// device = global rank % GPUs per node, and rank) and a ring graph of 2 channels listing those GPUs in ring
// order, between <net> devices when the communicator spans nodes. The stand-in's ring order on a node is its
// devices in ascending order, or descending with GREYHOUND_SIM_NCCL_RING=descending (a topology whose search
// enters the node at its last GPU; a test can then tell the dump's order from group-rank order). With them, a
// tree graph (id 1) of one channel: its chain through the node's devices in ascending order whatever the
// ring's, its pattern GREYHOUND_SIM_NCCL_TREE (balanced, split or tree; default balanced, NCCL's first choice).
int dump_rank_env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? 0 : std::atoi(v);
}

void write_nccl_dumps(ncclComm* c) {
  const char* graph_path = std::getenv("NCCL_GRAPH_DUMP_FILE");
  const char* topo_path = std::getenv("NCCL_TOPO_DUMP_FILE");
  const gs::SimProcess& sp = gs::sim_process();
  const int gpn = std::max(1, sp.model.gpus_per_node);
  const int my_node = c->nodes[static_cast<std::size_t>(c->rank)];
  std::vector<std::pair<int, int>> local;  // (device, communicator rank) of this node's ranks
  bool spans = false;
  for (int r = 0; r < c->nranks; ++r) {
    if (c->nodes[static_cast<std::size_t>(r)] != my_node) {
      spans = true;
      continue;
    }
    local.push_back({c->info(r)->global_rank % gpn, r});
  }
  std::sort(local.begin(), local.end());
  const std::vector<std::pair<int, int>> chain = local;  // the tree's, ascending
  const char* order = std::getenv("GREYHOUND_SIM_NCCL_RING");
  if (order != nullptr && std::string(order) == "descending") std::reverse(local.begin(), local.end());
  const char* tree_env = std::getenv("GREYHOUND_SIM_NCCL_TREE");
  const std::string tree = tree_env == nullptr || *tree_env == '\0' ? "balanced" : tree_env;
  const int tree_pattern = tree == "split" ? 2 : tree == "tree" ? 3 : 1;  // NCCL_TOPO_PATTERN_*
  if (topo_path != nullptr && *topo_path != '\0' && c->rank == dump_rank_env("NCCL_TOPO_DUMP_FILE_RANK")) {
    if (FILE* f = std::fopen(topo_path, "w")) {
      std::fprintf(f, "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\">\n");
      for (const auto& [dev, r] : local) {
        std::fprintf(f, "    <pci busid=\"0000:%02x:00.0\" class=\"0x030200\">\n", 0x10 + dev);
        std::fprintf(f, "      <gpu dev=\"%d\" sm=\"90\" rank=\"%d\" gdr=\"1\"/>\n    </pci>\n", dev, r);
      }
      std::fprintf(f, "  </cpu>\n</system>\n");
      std::fclose(f);
    }
  }
  if (graph_path != nullptr && *graph_path != '\0' && c->rank == dump_rank_env("NCCL_GRAPH_DUMP_FILE_RANK")) {
    if (FILE* f = std::fopen(graph_path, "w")) {
      std::fprintf(f, "<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"2\" "
                      "speedintra=\"40\" speedinter=\"20\" latencyinter=\"0\" typeintra=\"NVL\" typeinter=\"PIX\" "
                      "samechannels=\"1\">\n");
      for (int ch = 0; ch < 2; ++ch) {
        std::fprintf(f, "    <channel>\n");
        if (spans) std::fprintf(f, "      <net dev=\"0\"/>\n");
        for (const auto& [dev, r] : local) std::fprintf(f, "      <gpu dev=\"%d\"/>\n", dev);
        if (spans) std::fprintf(f, "      <net dev=\"0\"/>\n");
        std::fprintf(f, "    </channel>\n");
      }
      std::fprintf(f, "  </graph>\n  <graph id=\"1\" pattern=\"%d\" crossnic=\"0\" nchannels=\"1\" speedintra=\"40\" "
                      "speedinter=\"20\" latencyinter=\"0\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\">\n"
                      "    <channel>\n",
                   tree_pattern);
      if (spans) std::fprintf(f, "      <net dev=\"0\"/>\n");
      for (const auto& [dev, r] : chain) std::fprintf(f, "      <gpu dev=\"%d\"/>\n", dev);
      if (spans) std::fprintf(f, "      <net dev=\"0\"/>\n");
      std::fprintf(f, "    </channel>\n  </graph>\n</graphs>\n");
      std::fclose(f);
    }
  }
}

void detach(ncclComm* c) {
  if (c == nullptr || c->detached) return;
  c->detached = true;
  if (c->header()->left.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(c->nranks)) {
    ::unlink(c->path.c_str());
  }
  munmap(c->base, c->bytes);
  c->base = nullptr;
}

// ---- collectives ------------------------------------------------------------------------------------------

struct Collective {
  Op op;
  const void* send;
  void* recv;
  std::size_t count;
  int dtype;
  int redop;
  int root;
  ncclComm* comm;
};

ncclResult_t check_collective(const Collective& a) {
  if (a.comm == nullptr || a.comm->base == nullptr) {
    set_error("%s: invalid communicator", std::string(greyhound::op_name(a.op)).c_str());
    return ncclInvalidArgument;
  }
  if (gs::dtype_bytes(a.dtype) == 0) {
    set_error("%s: invalid datatype %d", std::string(greyhound::op_name(a.op)).c_str(), a.dtype);
    return ncclInvalidArgument;
  }
  const bool reduces = a.op == Op::kAllReduce || a.op == Op::kReduce || a.op == Op::kReduceScatter;
  if (reduces && !gs::reduction_supported(a.dtype, a.redop)) {
    set_error("%s: reduction %d on datatype %d is not supported by the CPU stand-in",
              std::string(greyhound::op_name(a.op)).c_str(), a.redop, a.dtype);
    return ncclInvalidUsage;
  }
  const bool rooted = a.op == Op::kBroadcast || a.op == Op::kReduce || a.op == Op::kGather || a.op == Op::kScatter;
  if (rooted && (a.root < 0 || a.root >= a.comm->nranks)) {
    set_error("%s: root %d outside the communicator of %d ranks", std::string(greyhound::op_name(a.op)).c_str(),
              a.root, a.comm->nranks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// Runs one collective to completion, including its modeled duration.
ncclResult_t run_collective(const Collective& a) {
  if (const ncclResult_t rc = check_collective(a); rc != ncclSuccess) return rc;
  ncclComm* c = a.comm;
  const int n = c->nranks;
  const int me = c->rank;
  const std::size_t esz = gs::dtype_bytes(a.dtype);
  const gs::SimProcess& sp = gs::sim_process();
  const char* what = greyhound::op_name(a.op).data();

  gs::host_launch();
  RankInfo* mine = c->info(me);
  mine->arrive_ns = gs::model_now();
  mine->op = static_cast<std::int32_t>(a.op);
  mine->dtype = a.dtype;
  mine->redop = a.redop;
  mine->root = a.root;
  mine->count = a.count;

  // Elements per round: the staging area holds one slice per destination for the personalised ops.
  const bool per_peer = a.op == Op::kReduceScatter || a.op == Op::kAlltoAll || a.op == Op::kScatter;
  const std::size_t slice = std::max<std::size_t>(1, kStagingBytes / esz / (per_peer ? static_cast<std::size_t>(n) : 1));
  const std::size_t rounds = a.count == 0 ? 1 : (a.count + slice - 1) / slice;
  std::uint64_t end_ns = 0;
  std::vector<const void*> inputs(static_cast<std::size_t>(n));
  auto* send = static_cast<const unsigned char*>(a.send);
  auto* recv = static_cast<unsigned char*>(a.recv);

  for (std::size_t round = 0; round < rounds; ++round) {
    const std::size_t off = round * slice;
    const std::size_t len = a.count == 0 ? 0 : std::min(slice, a.count - off);
    const std::size_t bytes = len * esz;
    unsigned char* st = c->staging(me);
    // Stage this rank's input slice(s).
    switch (a.op) {
      case Op::kAllReduce:
      case Op::kReduce:
      case Op::kAllGather:
      case Op::kGather:
        if (bytes) std::memcpy(st, send + off * esz, bytes);
        break;
      case Op::kBroadcast:
        if (me == a.root && bytes) std::memcpy(st, send + off * esz, bytes);
        break;
      case Op::kReduceScatter:
      case Op::kAlltoAll:
        for (int k = 0; k < n && bytes; ++k) {
          std::memcpy(st + static_cast<std::size_t>(k) * slice * esz, send + (static_cast<std::size_t>(k) * a.count + off) * esz, bytes);
        }
        break;
      case Op::kScatter:
        for (int k = 0; k < n && bytes && me == a.root; ++k) {
          std::memcpy(st + static_cast<std::size_t>(k) * slice * esz, send + (static_cast<std::size_t>(k) * a.count + off) * esz, bytes);
        }
        break;
      default:
        break;
    }
    if (const ncclResult_t rc = barrier(c, what); rc != ncclSuccess) return rc;
    if (round == 0) {
      // Every rank sees the same descriptors and arrival times, so all decide alike.
      std::uint64_t start = 0;
      for (int r = 0; r < n; ++r) {
        const RankInfo* o = c->info(r);
        if (o->op != mine->op || o->count != mine->count || o->dtype != mine->dtype || o->root != mine->root ||
            o->redop != mine->redop) {
          set_error("%s: ranks disagree (rank %d called %s count %llu, rank %d called %s count %llu)", what, me,
                    what, static_cast<unsigned long long>(mine->count), r,
                    greyhound::op_name(static_cast<Op>(o->op)).data(), static_cast<unsigned long long>(o->count));
          barrier(c, what);
          return ncclInvalidUsage;
        }
        start = std::max(start, o->arrive_ns);
      }
      const double dur = gs::collective_seconds(sp.model, sp.faults, a.op, c->nodes, a.count * esz,
                                                sp.job_time_s(start));
      end_ns = start + gs::seconds_to_ns(dur);
    }
    switch (a.op) {
      case Op::kAllReduce:
      case Op::kReduce:
        if (a.op == Op::kAllReduce || me == a.root) {
          for (int r = 0; r < n; ++r) inputs[static_cast<std::size_t>(r)] = c->staging(r);
          if (len) gs::reduce(a.dtype, a.redop, inputs.data(), n, recv + off * esz, len);
        }
        break;
      case Op::kBroadcast:
        if (bytes) std::memcpy(recv + off * esz, c->staging(a.root), bytes);
        break;
      case Op::kAllGather:
      case Op::kGather:
        if (a.op == Op::kAllGather || me == a.root) {
          for (int r = 0; r < n && bytes; ++r) {
            std::memcpy(recv + (static_cast<std::size_t>(r) * a.count + off) * esz, c->staging(r), bytes);
          }
        }
        break;
      case Op::kReduceScatter:
        for (int r = 0; r < n; ++r) {
          inputs[static_cast<std::size_t>(r)] = c->staging(r) + static_cast<std::size_t>(me) * slice * esz;
        }
        if (len) gs::reduce(a.dtype, a.redop, inputs.data(), n, recv + off * esz, len);
        break;
      case Op::kAlltoAll:
        for (int r = 0; r < n && bytes; ++r) {
          std::memcpy(recv + (static_cast<std::size_t>(r) * a.count + off) * esz,
                      c->staging(r) + static_cast<std::size_t>(me) * slice * esz, bytes);
        }
        break;
      case Op::kScatter:
        if (bytes) std::memcpy(recv + off * esz, c->staging(a.root) + static_cast<std::size_t>(me) * slice * esz, bytes);
        break;
      default:
        break;
    }
    if (const ncclResult_t rc = barrier(c, what); rc != ncclSuccess) return rc;
  }
  gs::model_wait_until(end_ns);
  return ncclSuccess;
}

// ---- point to point ---------------------------------------------------------------------------------------

struct P2P {
  bool is_send;
  ncclComm* comm;
  int peer;
  unsigned char* buf;  // send: read from; recv: written to
  std::size_t bytes;
  std::uint64_t index = 0;  // message index on this (comm, peer, direction)
  int phase = 0;            // 0 header, 1 data, 2 wait ack (send), 3 done
  std::size_t done = 0;
  std::uint64_t end_ns = 0;
};

void channel_write(Channel* ch, std::uint64_t pos, const unsigned char* src, std::size_t n) {
  const std::size_t at = pos % kChannelBytes;
  const std::size_t first = std::min(n, kChannelBytes - at);
  std::memcpy(ch->data + at, src, first);
  if (n > first) std::memcpy(ch->data, src + first, n - first);
}

void channel_read(const Channel* ch, std::uint64_t pos, unsigned char* dst, std::size_t n) {
  const std::size_t at = pos % kChannelBytes;
  const std::size_t first = std::min(n, kChannelBytes - at);
  std::memcpy(dst, ch->data + at, first);
  if (n > first) std::memcpy(dst + first, ch->data, n - first);
}

// One step of progress; returns true if anything moved. Errors go to *rc.
bool p2p_step(P2P& op, std::uint64_t arrive_ns, ncclResult_t* rc) {
  ncclComm* c = op.comm;
  const auto peer = static_cast<std::size_t>(op.peer);
  const gs::SimProcess& sp = gs::sim_process();
  if (op.is_send) {
    Channel* ch = c->channel(c->rank, op.peer);
    if (op.phase < 2 && c->sent[peer] != op.index) return false;  // an earlier message to peer goes first
    const std::uint64_t head = ch->head.load(std::memory_order_relaxed);
    const std::uint64_t free_bytes = kChannelBytes - (head - ch->tail.load(std::memory_order_acquire));
    if (op.phase == 0) {
      if (free_bytes < sizeof(MessageHeader)) return false;
      const MessageHeader h{op.bytes, arrive_ns, op.index, kIdMagic};
      channel_write(ch, head, reinterpret_cast<const unsigned char*>(&h), sizeof h);
      ch->head.store(head + sizeof h, std::memory_order_release);
      op.phase = 1;
    } else if (op.phase == 1) {
      const std::size_t n = std::min<std::uint64_t>(free_bytes, op.bytes - op.done);
      if (n == 0 && op.done < op.bytes) return false;
      channel_write(ch, head, op.buf + op.done, n);
      ch->head.store(head + n, std::memory_order_release);
      op.done += n;
      if (op.done == op.bytes) {
        op.phase = 2;
        ++c->sent[peer];
      }
    } else if (op.phase == 2) {
      if (ch->acks.load(std::memory_order_acquire) <= op.index) return false;
      op.end_ns = ch->ack_end_ns[op.index % kAckSlots];
      op.phase = 3;
      return true;  // nothing for the peer to see
    } else {
      return false;
    }
    gs::ring_doorbell(&c->doorbell(op.peer)->word);
    return true;
  }
  Channel* ch = c->channel(op.peer, c->rank);
  if (c->received[peer] != op.index) return false;
  const std::uint64_t tail = ch->tail.load(std::memory_order_relaxed);
  const std::uint64_t avail = ch->head.load(std::memory_order_acquire) - tail;
  if (op.phase == 0) {
    if (avail < sizeof(MessageHeader)) return false;
    MessageHeader h{};
    channel_read(ch, tail, reinterpret_cast<unsigned char*>(&h), sizeof h);
    if (h.magic != kIdMagic || h.index != op.index || h.bytes != op.bytes) {
      set_error("Recv from peer %d: message of %llu bytes does not match the %zu bytes posted", op.peer,
                static_cast<unsigned long long>(h.bytes), op.bytes);
      *rc = ncclInvalidUsage;
      op.phase = 3;
      return true;
    }
    const std::uint64_t start = std::max(h.arrive_ns, arrive_ns);
    const double dur = gs::p2p_seconds(sp.model, sp.faults, c->nodes[peer], c->nodes[static_cast<std::size_t>(c->rank)],
                                       op.bytes, sp.job_time_s(start));
    op.end_ns = start + gs::seconds_to_ns(dur);
    ch->ack_end_ns[op.index % kAckSlots] = op.end_ns;
    ch->acks.store(op.index + 1, std::memory_order_release);
    ch->tail.store(tail + sizeof h, std::memory_order_release);
    op.phase = 1;
    if (op.bytes == 0) {
      op.phase = 3;
      ++c->received[peer];
    }
  } else if (op.phase == 1) {
    const std::size_t n = std::min<std::uint64_t>(avail, op.bytes - op.done);
    if (n == 0) return false;
    channel_read(ch, tail, op.buf + op.done, n);
    ch->tail.store(tail + n, std::memory_order_release);
    op.done += n;
    if (op.done == op.bytes) {
      op.phase = 3;
      ++c->received[peer];
    }
  } else {
    return false;
  }
  gs::ring_doorbell(&c->doorbell(op.peer)->word);
  return true;
}

ncclResult_t run_p2p(std::vector<P2P>& ops) {
  if (ops.empty()) return ncclSuccess;
  gs::host_launch();
  const std::uint64_t arrive = gs::model_now();
  ncclResult_t rc = ncclSuccess;
  ncclComm* wait_comm = ops.front().comm;
  bool several_comms = false;
  for (const P2P& op : ops) several_comms |= op.comm != wait_comm;
  std::atomic<std::uint32_t>* bell = &wait_comm->doorbell(wait_comm->rank)->word;
  const std::uint64_t end = deadline();
  std::uint64_t next_liveness = gs::now_ns() + 500'000'000ull;
  for (;;) {
    const std::uint32_t seen = bell->load(std::memory_order_acquire);
    bool progressed = true;
    while (progressed) {
      progressed = false;
      for (P2P& op : ops) progressed |= p2p_step(op, arrive, &rc);
    }
    if (rc != ncclSuccess) return rc;
    if (std::all_of(ops.begin(), ops.end(), [](const P2P& op) { return op.phase == 3; })) break;
    const std::uint64_t now = gs::now_ns();
    if (now >= end) {
      set_error("timed out after %.0f s in Send/Recv with peer %d", gs::sim_process().timeout_s, ops.front().peer);
      return ncclSystemError;
    }
    if (now >= next_liveness) {
      next_liveness = now + 500'000'000ull;
      for (const P2P& op : ops) {
        const int pid = op.comm->pids[static_cast<std::size_t>(op.peer)];
        if (op.phase != 3 && kill(pid, 0) != 0 && errno == ESRCH) {
          set_error("Send/Recv peer %d exited", op.peer);
          return ncclRemoteError;
        }
      }
    }
    gs::futex_wait(bell, seen, end, several_comms ? 2'000'000ull : 100'000'000ull);
  }
  std::uint64_t finish = 0;
  for (const P2P& op : ops) finish = std::max(finish, op.end_ns);
  gs::model_wait_until(finish);
  return ncclSuccess;
}

// ---- groups -----------------------------------------------------------------------------------------------

struct GroupState {
  int depth = 0;
  std::vector<P2P> p2p;
  std::vector<Collective> collectives;
  ncclResult_t deferred_error = ncclSuccess;
};
thread_local GroupState t_group;

ncclResult_t enqueue_p2p(bool is_send, const void* buf, std::size_t count, ncclDataType_t dt, int peer, ncclComm_t comm) {
  const std::size_t esz = gs::dtype_bytes(dt);
  if (comm == nullptr || comm->base == nullptr || esz == 0 || peer < 0 || peer >= comm->nranks) {
    set_error("%s: invalid arguments (peer %d, datatype %d)", is_send ? "Send" : "Recv", peer, static_cast<int>(dt));
    return ncclInvalidArgument;
  }
  P2P op{is_send, comm, peer, static_cast<unsigned char*>(const_cast<void*>(buf)), count * esz};
  auto& seq = is_send ? comm->send_seq : comm->recv_seq;
  op.index = seq[static_cast<std::size_t>(peer)]++;
  if (t_group.depth > 0) {
    t_group.p2p.push_back(op);
    return ncclSuccess;
  }
  std::vector<P2P> one{op};
  return run_p2p(one);
}

ncclResult_t collective(const Collective& a) {
  if (t_group.depth > 0) {
    if (const ncclResult_t rc = check_collective(a); rc != ncclSuccess) return rc;
    t_group.collectives.push_back(a);
    return ncclSuccess;
  }
  return run_collective(a);
}

ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, std::uint64_t salt) {
  if (comm == nullptr || comm->base == nullptr || newcomm == nullptr) {
    set_error("CommSplit: invalid arguments");
    return ncclInvalidArgument;
  }
  *newcomm = nullptr;
  const std::uint32_t index = comm->splits++;
  RankInfo* mine = comm->info(comm->rank);
  mine->split_color = color;
  mine->split_key = key;
  if (const ncclResult_t rc = barrier(comm, "CommSplit"); rc != ncclSuccess) return rc;
  std::vector<std::pair<std::pair<int, int>, int>> members;  // ((key, parent rank), parent rank)
  for (int r = 0; r < comm->nranks; ++r) {
    const RankInfo* o = comm->info(r);
    if (color != NCCL_SPLIT_NOCOLOR && o->split_color == color) members.push_back({{o->split_key, r}, r});
  }
  if (const ncclResult_t rc = barrier(comm, "CommSplit"); rc != ncclSuccess) return rc;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == comm->rank) new_rank = static_cast<int>(i);
  }
  const std::uint64_t child_key = mix64(comm->key ^ mix64(index + kGoldenGamma * (salt + 1)) ^
                                        mix64(static_cast<std::uint64_t>(static_cast<std::int64_t>(color)) + 77));
  return attach(newcomm, child_key, static_cast<int>(members.size()), new_rank);
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return t_last_error; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return ncclInvalidArgument;
  std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  std::uint64_t key = 0;
  if (getrandom(&key, sizeof key, 0) != static_cast<ssize_t>(sizeof key)) {
    key = mix64(gs::now_ns() ^ (static_cast<std::uint64_t>(getpid()) << 32));
  }
  std::memcpy(uniqueId->internal, &kIdMagic, sizeof kIdMagic);
  std::memcpy(uniqueId->internal + 8, &key, sizeof key);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  std::uint64_t magic = 0, key = 0;
  std::memcpy(&magic, commId.internal, sizeof magic);
  std::memcpy(&key, commId.internal + 8, sizeof key);
  if (magic != kIdMagic) {
    set_error("CommInitRank: the unique id was not made by this stand-in's ncclGetUniqueId");
    return ncclInvalidArgument;
  }
  return attach(comm, key, nranks, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t*) {
  return ncclCommInitRank(comm, nranks, commId, rank);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t*) {
  if (nId < 1 || commIds == nullptr) return ncclInvalidArgument;
  return ncclCommInitRank(newcomm, nranks, commIds[0], myrank);
}

ncclResult_t ncclCommInitAll(ncclComm_t*, int, const int*) {
  set_error("CommInitAll (one process, several devices) is not supported by the CPU stand-in");
  return ncclInvalidUsage;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  return split(comm, color, key, newcomm, 0);
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t*, int) {
  if (comm == nullptr) return ncclInvalidArgument;
  bool excluded = false;
  for (int i = 0; i < excludeRanksCount && excludeRanksList != nullptr; ++i) {
    excluded |= excludeRanksList[i] == comm->rank;
  }
  return split(comm, excluded ? NCCL_SPLIT_NOCOLOR : 0, comm->rank, newcomm, 1);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm == nullptr ? ncclInvalidArgument : ncclSuccess; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  detach(comm);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return ncclInvalidArgument;
  *asyncError = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return ncclInvalidArgument;
  const gs::SimProcess& sp = gs::sim_process();
  *device = sp.rank % sp.model.gpus_per_node;
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t, void*, size_t, void** handle) {
  if (handle != nullptr) *handle = nullptr;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t, void*) { return ncclSuccess; }

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return ncclInvalidArgument;
  *ptr = std::malloc(size == 0 ? 1 : size);
  return *ptr != nullptr ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclMemFree(void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t) {
  set_error("custom reduction operators are not supported by the CPU stand-in");
  return ncclInvalidUsage;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t, ncclComm_t) { return ncclInvalidUsage; }

ncclResult_t ncclGroupStart() {
  ++t_group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group.depth == 0) {
    set_error("GroupEnd without GroupStart");
    return ncclInvalidUsage;
  }
  if (--t_group.depth > 0) return ncclSuccess;
  std::vector<P2P> p2p;
  std::vector<Collective> colls;
  p2p.swap(t_group.p2p);
  colls.swap(t_group.collectives);
  ncclResult_t rc = run_p2p(p2p);
  for (const Collective& a : colls) {
    if (rc != ncclSuccess) break;
    rc = run_collective(a);
  }
  return rc;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) { return ncclInvalidUsage; }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  return collective({Op::kAllReduce, sendbuff, recvbuff, count, datatype, op, -1, comm});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t) {
  return collective({Op::kAllGather, sendbuff, recvbuff, sendcount, datatype, 0, -1, comm});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  return collective({Op::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, -1, comm});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t) {
  return collective({Op::kBroadcast, sendbuff, recvbuff, count, datatype, 0, root, comm});
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t) {
  return collective({Op::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm});
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t) {
  return collective({Op::kAlltoAll, sendbuff, recvbuff, count, datatype, 0, -1, comm});
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t) {
  return collective({Op::kGather, sendbuff, recvbuff, count, datatype, 0, root, comm});
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t) {
  return collective({Op::kScatter, sendbuff, recvbuff, count, datatype, 0, root, comm});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t) {
  return enqueue_p2p(true, sendbuff, count, datatype, peer, comm);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t) {
  return enqueue_p2p(false, recvbuff, count, datatype, peer, comm);
}

}  // extern "C"
#pragma GCC visibility pop

// Fail fast on a bad environment (fault schedule, model) when the job loads NCCL, not mid-run.
__attribute__((constructor)) static void greyhound_sim_nccl_load() { (void)gs::sim_process(); }
