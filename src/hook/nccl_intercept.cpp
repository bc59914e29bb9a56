// The NCCL entry points libgreyhound.so interposes, with the exact signatures of nccl.h (2.28): each
// forwards to the real function (resolved once: dlsym(RTLD_NEXT), else in a loaded libnccl.so*, runtime.h),
// then appends one record.
// Order per call: read the clock, call the real NCCL, record; errno and the real return code are handed
// back untouched. Re-entrant calls (NCCL calling itself through its PLT) are forwarded unrecorded.
#include <nccl.h>
#include <unistd.h>

#include <cerrno>

#include "greyhound/ops.h"
#include "gpu_timer.h"
#include "group_id.h"
#include "nccl_dumps.h"
#include "pause_gate.h"
#include "runtime.h"

namespace gh = greyhound;
namespace ghh = greyhound::hook;

namespace {

using gh::Op;
using gh::RecordPayload;
using gh::RingControl;
using gh::kProfileDevice;
using gh::kProfileStatusActive;
using gh::kProfileStatusUnavailable;

// The real `fn` (one of ours), resolved once (thread-safe static init); nullptr if NCCL is absent.
#define GH_REAL(fn)                                                                            \
  static const auto real = reinterpret_cast<decltype(&fn)>(                                    \
      ghh::resolve_real(#fn, reinterpret_cast<void*>(&fn)))
// A real NCCL function we do not interpose (no relocation against it: it may be absent at load time).
#define GH_REAL_OTHER(var, fn) \
  static const auto var = reinterpret_cast<decltype(&fn)>(ghh::resolve_real(#fn, nullptr))

// Every field set explicitly (no zero-fill of the whole struct first: this is the hot path).
inline RecordPayload blank_record(std::uint64_t t0, ncclResult_t rc) {
  RecordPayload p;
  p.seq = 0;
  p.t_ns = t0;
  p.group_id = 0;
  p.count = 0;
  p.bytes = 0;
  p.stream = 0;
  p.aux = 0;
  p.group_rank = -1;
  p.group_size = -1;
  p.peer = -1;
  p.root = -1;
  p.tid = ghh::current_tid();
  p.result = static_cast<std::int32_t>(rc);
  p.op = 0;
  p.dtype = 0xff;
  p.flags = ghh::t_group_depth > 0 ? gh::kRecordInGroup : 0;
  p.measured_op = 0;
  p.color = -1;
  p.dur_ns = 0;
  p.group_seq = 0;
  p.reserved = 0;
  p.check = 0;
  return p;
}

// What the device timer does with a call while the agent asks for profiling.
enum class Timed { kNo, kCall, kGroupStart, kGroupEnd };

// Thread state of a group being timed as one (from its first call to the end of ncclGroupEnd).
GH_TLS int t_group_pair = -1;
GH_TLS void* t_group_stream = nullptr;
GH_TLS bool t_group_first_set = false;
GH_TLS RecordPayload t_group_first;

inline bool profiling_now(const RingControl& c, std::uint64_t t0) {
  if ((c.profile_flags.load(std::memory_order_relaxed) & kProfileDevice) == 0) return false;
  const std::uint64_t until = c.profile_until_ns.load(std::memory_order_relaxed);
  return until == 0 || t0 < until;
}

// The core of every recorded call: the real call (flagged, so that NCCL calling itself through its PLT is
// forwarded unrecorded), then one record, which `fill(p, rc)` completes and which carries the real return
// code. *saved_errno: errno as the real call left it (the append must not change what the caller sees).
// The call's place on its communicator (RecordPayload::group_seq) and what the in-call marker says of it.
struct CallTag {
  std::uint64_t group_id = 0;
  std::uint64_t group_seq = 0;
  std::uint8_t op = 0;
};

// The last call of this thread's open ncclGroupStart/End: what its ncclGroupEnd waits on.
GH_TLS CallTag t_group_last;
// The communicator of the call in progress and its group table entry, looked up once per call (traced_on)
// and read again by fill_group.
GH_TLS const void* t_call_comm = nullptr;
GH_TLS ghh::GroupTable::Entry* t_call_entry = nullptr;

template <typename Real, typename Fill, typename... Args>
__attribute__((always_inline)) inline RecordPayload call_and_record(ghh::Runtime& rt, std::uint64_t t0, Real real,
                                                                    Fill& fill, int* saved_errno, const CallTag& tag,
                                                                    Args... args) {
  // The in-call marker: a rank blocked inside this call is seen while it waits (its record comes after).
  // A seqlock of one word: enter_ns 0 while the fields change, the entry time once they are whole; one
  // writing thread at a time (`writer`): a thread that finds another writing leaves the marker to it.
  gh::RingInCall& in_call = rt.ring->header()->in_call;
  if (in_call.writer.exchange(1, std::memory_order_acquire) == 0) {
    in_call.enter_ns.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    in_call.group_id = tag.group_id;
    in_call.group_seq = tag.group_seq;
    in_call.op = tag.op;
    in_call.tid = ghh::current_tid();
    in_call.enter_ns.store(t0, std::memory_order_release);
    in_call.writer.store(0, std::memory_order_release);
  }
  ghh::t_in_hook = true;
  const ncclResult_t rc = real(args...);
  ghh::t_in_hook = false;
  // Cleared only when it still shows this call (another thread's later call may be inside NCCL now).
  if (in_call.enter_ns.load(std::memory_order_relaxed) == t0) in_call.enter_ns.store(0, std::memory_order_release);
  *saved_errno = errno;
  RecordPayload p = blank_record(t0, rc);
  fill(p, rc);
  p.group_seq = p.group_id != 0 ? tag.group_seq : 0;  // ncclGroupEnd's group (its last call's) is the marker's only
  rt.ring->append(p);
  return p;
}

// The profiled variant of traced(): CUDA events around the call (or around the group it belongs to).
// Out of line: the ordinary path stays small.
template <typename Real, typename Fill, typename... Args>
__attribute__((noinline)) ncclResult_t traced_profiled(ghh::Runtime& rt, std::uint64_t t0, Timed kind,
                                                       void* stream, const CallTag& tag, Real real, Fill& fill,
                                                       Args... args) {
  RingControl& ctl = rt.ring->header()->control;
  ghh::GpuTimer* timer = kind != Timed::kNo ? ghh::GpuTimer::for_this_thread() : nullptr;
  const std::uint32_t status = timer != nullptr ? kProfileStatusActive : kProfileStatusUnavailable;
  if (kind != Timed::kNo && ctl.profile_status.load(std::memory_order_relaxed) != status) {
    ctl.profile_status.store(status, std::memory_order_relaxed);
  }
  const bool in_group = ghh::t_group_depth > 0;
  int pair = -1;
  if (timer != nullptr && kind == Timed::kCall) {
    if (!in_group) {
      pair = timer->begin(stream, ctl);
    } else if (t_group_pair < 0) {
      t_group_pair = timer->begin(stream, ctl);
      t_group_stream = stream;
      t_group_first_set = false;
    }
  }
  int saved_errno = 0;
  const RecordPayload p = call_and_record(rt, t0, real, fill, &saved_errno, tag, args...);
  if (timer != nullptr) {
    if (kind == Timed::kCall && !in_group) timer->end(pair, stream, p);
    if (kind == Timed::kCall && in_group && !t_group_first_set) {
      t_group_first = p;
      t_group_first_set = true;
    }
    if (kind == Timed::kGroupEnd && ghh::t_group_depth == 0 && t_group_pair >= 0) {
      RecordPayload measured = p;  // the GroupEnd, with the group and sizes of its first call
      if (t_group_first_set) {
        measured.group_id = t_group_first.group_id;
        measured.group_rank = t_group_first.group_rank;
        measured.group_size = t_group_first.group_size;
        measured.bytes = t_group_first.bytes;
        measured.count = t_group_first.count;
        measured.peer = t_group_first.peer;
        measured.stream = t_group_first.stream;
      }
      timer->end(t_group_pair, t_group_stream, measured);
      t_group_pair = -1;
    }
    timer->poll(*rt.ring);
  }
  errno = saved_errno;
  return static_cast<ncclResult_t>(p.result);
}

// Calls `real(args...)` and, when recording, appends the record that `fill(p, rc)` completes. fill runs
// after the call, so it may read out-parameters. While the agent asks for device profiling, the call
// takes traced_profiled() instead. `comm` (a call on a communicator: a collective, a send or a receive)
// numbers the call on it; ncclGroupEnd carries the number of its group's last call.
template <typename Real, typename Fill, typename... Args>
inline ncclResult_t traced_on(ncclComm_t comm, Op op, Real real, Timed kind, void* stream, Fill&& fill, Args... args) {
  if (real == nullptr) return ncclSystemError;
  if (ghh::t_in_hook) return real(args...);
  ghh::Runtime& rt = ghh::runtime();
  int mode = rt.mode.load(std::memory_order_acquire);
  if (mode == ghh::kUninit || mode == ghh::kInitialising) mode = ghh::ensure_init();
  if (mode != ghh::kRecording) return real(args...);

  if (__builtin_expect(ghh::pause_requested(*rt.ring->header()), 0)) {
    ghh::pause_gate(rt, stream, kind == Timed::kGroupEnd);
  }
  CallTag tag;
  tag.op = static_cast<std::uint8_t>(op);
  t_call_comm = comm;
  t_call_entry = comm != nullptr ? rt.groups.find(comm) : nullptr;
  if (comm != nullptr) {
    if (auto* e = t_call_entry) {
      tag.group_id = e->group_id.load(std::memory_order_relaxed);
      // Collectives only: every member issues each of them, so their numbers agree across the group; a send
      // or a receive involves two members and keeps 0. Not a read-modify-write: NCCL does not allow two
      // threads to use one communicator at once, so a plain increment (no lock prefix) is exact.
      if (op != Op::kSend && op != Op::kRecv) {
        tag.group_seq = e->calls.load(std::memory_order_relaxed) + 1;
        e->calls.store(tag.group_seq, std::memory_order_relaxed);
      }
    }
    if (ghh::t_group_depth > 0) t_group_last = tag;
  } else if (kind == Timed::kGroupEnd && ghh::t_group_depth == 0) {  // the outermost end: where it blocks
    tag.group_id = t_group_last.group_id;
    tag.group_seq = t_group_last.group_seq;
    t_group_last = CallTag{};
  }
  const std::uint64_t t0 = ghh::monotonic_ns();
  if (profiling_now(rt.ring->header()->control, t0) || ghh::GpuTimer::pending_in_this_thread()) {
    return traced_profiled(rt, t0, kind, stream, tag, real, fill, args...);
  }
  int saved_errno = 0;
  const RecordPayload p = call_and_record(rt, t0, real, fill, &saved_errno, tag, args...);
  errno = saved_errno;
  return static_cast<ncclResult_t>(p.result);
}

template <typename Real, typename Fill, typename... Args>
inline ncclResult_t traced(Real real, Timed kind, void* stream, Fill&& fill, Args... args) {
  return traced_on(nullptr, kind == Timed::kGroupEnd ? Op::kGroupEnd : Op::kNone, real, kind, stream,
                   std::forward<Fill>(fill), args...);
}

// Rank and size of a communicator from the real NCCL; -1 while not yet known (non-blocking init).
void query_rank_size(ncclComm_t comm, int* rank, int* size) {
  GH_REAL_OTHER(count_fn, ncclCommCount);
  GH_REAL_OTHER(rank_fn, ncclCommUserRank);
  *rank = -1;
  *size = -1;
  if (comm == nullptr || count_fn == nullptr || rank_fn == nullptr) return;
  int n = -1, r = -1;
  if (count_fn(comm, &n) == ncclSuccess && rank_fn(comm, &r) == ncclSuccess) {
    *rank = r;
    *size = n;
  }
}

inline void fill_group(RecordPayload& p, ncclComm_t comm) {
  auto* e = comm == t_call_comm ? t_call_entry : ghh::runtime().groups.find(comm);
  if (e == nullptr) return;
  p.group_id = e->group_id.load(std::memory_order_relaxed);
  p.group_rank = e->rank.load(std::memory_order_relaxed);
  p.group_size = e->size.load(std::memory_order_relaxed);
  if (p.group_size < 0) {  // rare: learn it once the communicator is ready
    query_rank_size(comm, &p.group_rank, &p.group_size);
    if (p.group_size > 0) {
      e->rank.store(p.group_rank, std::memory_order_relaxed);
      e->size.store(p.group_size, std::memory_order_relaxed);
    }
  }
}

inline void fill_data(RecordPayload& p, Op op, ncclComm_t comm, size_t count, ncclDataType_t dt,
                      int peer, int root, cudaStream_t stream) {
  p.op = static_cast<std::uint8_t>(op);
  p.count = count;
  p.dtype = static_cast<std::uint8_t>(dt);
  p.bytes = count * gh::dtype_size(p.dtype);
  p.peer = peer;
  p.root = root;
  p.stream = reinterpret_cast<std::uint64_t>(stream);
  fill_group(p, comm);
}

// Registers a new communicator and fills the record of the call that made it.
void register_comm(RecordPayload& p, Op op, ncclResult_t rc, ncclComm_t comm, std::uint64_t group_id,
                   int rank, int size) {
  p.op = static_cast<std::uint8_t>(op);
  p.group_id = group_id;
  p.group_rank = rank;
  p.group_size = size;
  if ((rc != ncclSuccess && rc != ncclInProgress) || comm == nullptr) return;
  ghh::Runtime& rt = ghh::runtime();
  if (!rt.groups.insert(comm, group_id, rank, size)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      ghh::log_line(gh::LogLevel::kWarn, "more than %zu live communicators: new ones get group id 0",
                    ghh::GroupTable::kCapacity);
    }
  }
  // NCCL's dumps of a communicator made in full (with ncclInProgress they are still to come), next to the ring
  // before this record tells the agent of the group; the job's own copies where it asked for them.
  const bool recording = rt.mode.load(std::memory_order_acquire) == ghh::kRecording && rt.ring != nullptr;
  ghh::keep_nccl_dumps(recording ? rt.ring->path() : std::string(), group_id, rank, rc == ncclSuccess, p.t_ns);
}

void fill_lifecycle_end(RecordPayload& p, Op op, ncclComm_t comm) {
  p.op = static_cast<std::uint8_t>(op);
  fill_group(p, comm);
}

}  // namespace

// Built with -fvisibility=hidden; the entry points themselves are public (the version script exports
// nccl* and hides the rest).
#pragma GCC visibility push(default)
extern "C" {

// ---- collectives ----------------------------------------------------------------------------------------

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclAllReduce);
  return traced_on(comm, Op::kAllReduce, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kAllReduce, comm, count, datatype, -1, -1, stream);
  }, sendbuff, recvbuff, count, datatype, op, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclAllGather);
  return traced_on(comm, Op::kAllGather, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kAllGather, comm, sendcount, datatype, -1, -1, stream);
  }, sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  GH_REAL(ncclReduceScatter);
  return traced_on(comm, Op::kReduceScatter, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kReduceScatter, comm, recvcount, datatype, -1, -1, stream);
  }, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclBroadcast);
  return traced_on(comm, Op::kBroadcast, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kBroadcast, comm, count, datatype, -1, root, stream);
  }, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  GH_REAL(ncclBcast);
  return traced_on(comm, Op::kBcast, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kBcast, comm, count, datatype, -1, root, stream);
  }, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclReduce);
  return traced_on(comm, Op::kReduce, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kReduce, comm, count, datatype, -1, root, stream);
  }, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclAlltoAll);
  return traced_on(comm, Op::kAlltoAll, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kAlltoAll, comm, count, datatype, -1, -1, stream);
  }, sendbuff, recvbuff, count, datatype, comm, stream);
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclGather);
  return traced_on(comm, Op::kGather, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kGather, comm, count, datatype, -1, root, stream);
  }, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclScatter);
  return traced_on(comm, Op::kScatter, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kScatter, comm, count, datatype, -1, root, stream);
  }, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

// ---- point to point -------------------------------------------------------------------------------------

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  GH_REAL(ncclSend);
  return traced_on(comm, Op::kSend, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kSend, comm, count, datatype, peer, -1, stream);
  }, sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  GH_REAL(ncclRecv);
  return traced_on(comm, Op::kRecv, real, Timed::kCall, stream, [&](RecordPayload& p, ncclResult_t) {
    fill_data(p, Op::kRecv, comm, count, datatype, peer, -1, stream);
  }, recvbuff, count, datatype, peer, comm, stream);
}

// ---- groups ---------------------------------------------------------------------------------------------

ncclResult_t ncclGroupStart() {
  GH_REAL(ncclGroupStart);
  const ncclResult_t rc = traced(real, Timed::kGroupStart, nullptr, [&](RecordPayload& p, ncclResult_t) {
    p.op = static_cast<std::uint8_t>(Op::kGroupStart);
  });
  if (rc == ncclSuccess && !ghh::t_in_hook) ++ghh::t_group_depth;
  return rc;
}

ncclResult_t ncclGroupEnd() {
  GH_REAL(ncclGroupEnd);
  if (!ghh::t_in_hook && ghh::t_group_depth > 0) --ghh::t_group_depth;  // the end itself is outside
  return traced(real, Timed::kGroupEnd, nullptr, [&](RecordPayload& p, ncclResult_t) {
    p.op = static_cast<std::uint8_t>(Op::kGroupEnd);
  });
}

// ---- communicator lifecycle -----------------------------------------------------------------------------

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  GH_REAL(ncclGetUniqueId);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t rc) {
    p.op = static_cast<std::uint8_t>(Op::kGetUniqueId);
    if (rc == ncclSuccess && uniqueId != nullptr) {
      p.group_id = ghh::group_id_from_unique_id(uniqueId->internal, sizeof uniqueId->internal);
    }
  }, uniqueId);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  GH_REAL(ncclCommInitRank);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t rc) {
    register_comm(p, Op::kCommInitRank, rc, comm ? *comm : nullptr,
                  ghh::group_id_from_unique_id(commId.internal, sizeof commId.internal), rank, nranks);
  }, comm, nranks, commId, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  GH_REAL(ncclCommInitRankConfig);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t rc) {
    register_comm(p, Op::kCommInitRankConfig, rc, comm ? *comm : nullptr,
                  ghh::group_id_from_unique_id(commId.internal, sizeof commId.internal), rank, nranks);
  }, comm, nranks, commId, rank, config);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  GH_REAL(ncclCommInitRankScalable);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t rc) {
    std::uint64_t gid = 0;
    if (commIds != nullptr && nId > 0) {
      gid = ghh::group_id_from_unique_id(commIds, sizeof(ncclUniqueId) * static_cast<std::size_t>(nId));
    }
    register_comm(p, Op::kCommInitRankScalable, rc, newcomm ? *newcomm : nullptr, gid, myrank, nranks);
  }, newcomm, nranks, myrank, nId, commIds, config);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  GH_REAL(ncclCommInitAll);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t rc) {
    // One process owns every member: any id unique to this call works.
    static std::atomic<std::uint32_t> calls{0};
    const std::uint64_t salt[3] = {static_cast<std::uint64_t>(getpid()), calls.fetch_add(1), p.t_ns};
    const std::uint64_t gid = ghh::group_id_from_unique_id(salt, sizeof salt);
    for (int i = 0; comm != nullptr && i < ndev; ++i) {
      RecordPayload member = p;
      register_comm(member, Op::kCommInitAll, rc, comm[i], gid, i, ndev);
    }
    p.op = static_cast<std::uint8_t>(Op::kCommInitAll);
    p.group_id = gid;
    p.group_rank = 0;
    p.group_size = ndev;
  }, comm, ndev, devlist);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  GH_REAL(ncclCommSplit);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t rc) {
    auto* parent = ghh::runtime().groups.find(comm);
    const std::uint64_t parent_id = parent ? parent->group_id.load(std::memory_order_relaxed) : 0;
    const std::uint32_t index = parent ? parent->splits.fetch_add(1, std::memory_order_relaxed) : 0;
    p.aux = parent_id;
    p.color = color;
    ncclComm_t child = newcomm ? *newcomm : nullptr;
    if (color == NCCL_SPLIT_NOCOLOR || child == nullptr || parent_id == 0) {
      p.op = static_cast<std::uint8_t>(Op::kCommSplit);
      return;
    }
    int r = -1, n = -1;
    query_rank_size(child, &r, &n);
    register_comm(p, Op::kCommSplit, rc, child, ghh::group_id_from_split(parent_id, index, color), r, n);
  }, comm, color, key, newcomm, config);
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  GH_REAL(ncclCommShrink);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t rc) {
    auto* parent = ghh::runtime().groups.find(comm);
    const std::uint64_t parent_id = parent ? parent->group_id.load(std::memory_order_relaxed) : 0;
    const std::uint32_t index = parent ? parent->splits.fetch_add(1, std::memory_order_relaxed) : 0;
    p.aux = parent_id;
    ncclComm_t child = newcomm ? *newcomm : nullptr;
    if (child == nullptr || parent_id == 0) {
      p.op = static_cast<std::uint8_t>(Op::kCommShrink);
      return;
    }
    int r = -1, n = -1;
    query_rank_size(child, &r, &n);
    register_comm(p, Op::kCommShrink, rc, child,
                  ghh::group_id_from_shrink(parent_id, index, excludeRanksList, excludeRanksCount), r, n);
  }, comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  GH_REAL(ncclCommFinalize);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t) { fill_lifecycle_end(p, Op::kCommFinalize, comm); },
                comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  GH_REAL(ncclCommDestroy);
  // The group is looked up by the pointer value (never dereferenced) and then forgotten.
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t) {
    fill_lifecycle_end(p, Op::kCommDestroy, comm);
    ghh::runtime().groups.erase(comm);
  }, comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  GH_REAL(ncclCommAbort);
  return traced(real, Timed::kNo, nullptr, [&](RecordPayload& p, ncclResult_t) {
    fill_lifecycle_end(p, Op::kCommAbort, comm);
    ghh::runtime().groups.erase(comm);
  }, comm);
}

}  // extern "C"
#pragma GCC visibility pop
