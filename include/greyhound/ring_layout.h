// Shared-memory ring of NCCL call records: the one layout that libgreyhound.so (writer) and the agent,
// greyhoundctl and tests (readers) agree on. Everything here is a cross-process contract: every offset and
// size is pinned by static_assert below and by tests/unit/ring_layout_test.cpp. Change it only by bumping
// kRingVersion.
//
// File: one per process, <GREYHOUND_SHM_DIR>/greyhound.<job>.<rank> (mode 0600), RingHeader then
// `capacity` Records (capacity a power of two).
//
// Rule for full and overwrite: the ring is a flight recorder. Writers never block and never wait for
// readers: record number `seq` goes to slot seq % capacity and overwrites whatever was there. A reader
// that falls more than `capacity` records behind loses the oldest ones and learns exactly how many (the
// gap in sequence numbers). A writer drops its record (and counts it in `dropped`) only when its slot is
// still being written by a writer lapped by a whole ring, or already holds a newer record.
//
// Consistency: every slot is a seqlock. Its `stamp` is 2*seq+1 while record `seq` is being written and
// 2*seq+2 once it is complete; the payload is copied word by word with relaxed atomics between two
// acquire loads of the stamp, so a reader never accepts a record that changed while it copied. The last
// payload word is a checksum of the others (record_check): it catches the one case the stamp cannot, two
// writers of the same slot at once (possible only when a writer stalls for a whole ring), so claiming a
// slot needs no compare-and-swap on the hot path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace greyhound {

inline constexpr std::uint64_t kRingMagic = 0x31474E4952484721ull;  // "!GHRING1" little-endian
inline constexpr std::uint32_t kRingVersion = 2;  // 2: the pause block (PauseControl)
inline constexpr std::size_t kRingHeaderSize = 4096;
inline constexpr std::size_t kRecordSize = 128;
inline constexpr std::size_t kRingJobMax = 64;
inline constexpr std::size_t kRingHostMax = 64;

// Timing records (op == Op::kTiming) exist only while the agent asks for device profiling (RingControl):
// each carries the device time (`dur_ns`, from a pair of CUDA events around the call on its stream) of an
// earlier record (`aux` = its seq, `measured_op` = its op, group/peer/bytes copied from it). Calls inside
// ncclGroupStart/End are timed as one: from the first call's launch to the end of ncclGroupEnd, measured
// record = the GroupEnd. Timing records come after the records they measure, in completion order.

// Record flags.
inline constexpr std::uint8_t kRecordInGroup = 0x1;  // issued between ncclGroupStart and ncclGroupEnd

// The payload of one record: what readers get. Plain data; 15 words.
struct RecordPayload {
  std::uint64_t seq;         // per-ring sequence number, 0, 1, 2, ... in reservation order
  std::uint64_t t_ns;        // CLOCK_MONOTONIC at entry to the intercepted call
  std::uint64_t group_id;    // same on every member of a communicator; 0 when none
  std::uint64_t count;       // NCCL's count argument (AllGather: sendcount, ReduceScatter: recvcount)
  std::uint64_t bytes;       // count * datatype size
  std::uint64_t stream;      // cudaStream_t value
  std::uint64_t aux;         // op-specific: parent group id for CommSplit/CommShrink, else 0
  std::int32_t group_rank;   // rank in the communicator, -1 when unknown
  std::int32_t group_size;   // communicator size, -1 when unknown
  std::int32_t peer;         // Send/Recv peer (rank in the communicator), else -1
  std::int32_t root;         // Broadcast/Bcast/Reduce/Gather/Scatter root, else -1
  std::uint32_t tid;         // OS thread id of the caller
  std::int32_t result;       // ncclResult_t the real NCCL returned
  std::uint8_t op;           // greyhound::Op
  std::uint8_t dtype;        // ncclDataType_t, 0xff when not applicable
  std::uint8_t flags;        // kRecordInGroup, ...
  std::uint8_t measured_op;  // Timing records: the op of the measured record; else 0
  std::int32_t color;        // CommSplit color, else -1
  std::uint64_t dur_ns;      // Timing records: device time of the measured call (or group); else 0
  std::uint64_t group_seq;   // this rank's collectives on the communicator so far, this one included (1, 2, ...);
                             // 0: not a collective (send, receive, lifecycle) or no communicator
  std::uint64_t reserved;
  std::uint64_t check;       // record_check() of the words before it, written by the ring writer
};
static_assert(sizeof(RecordPayload) == 120);
static_assert(offsetof(RecordPayload, seq) == 0);
static_assert(offsetof(RecordPayload, t_ns) == 8);
static_assert(offsetof(RecordPayload, group_id) == 16);
static_assert(offsetof(RecordPayload, count) == 24);
static_assert(offsetof(RecordPayload, bytes) == 32);
static_assert(offsetof(RecordPayload, stream) == 40);
static_assert(offsetof(RecordPayload, aux) == 48);
static_assert(offsetof(RecordPayload, group_rank) == 56);
static_assert(offsetof(RecordPayload, group_size) == 60);
static_assert(offsetof(RecordPayload, peer) == 64);
static_assert(offsetof(RecordPayload, root) == 68);
static_assert(offsetof(RecordPayload, tid) == 72);
static_assert(offsetof(RecordPayload, result) == 76);
static_assert(offsetof(RecordPayload, op) == 80);
static_assert(offsetof(RecordPayload, dtype) == 81);
static_assert(offsetof(RecordPayload, flags) == 82);
static_assert(offsetof(RecordPayload, color) == 84);
static_assert(offsetof(RecordPayload, measured_op) == 83);
static_assert(offsetof(RecordPayload, dur_ns) == 88);
static_assert(offsetof(RecordPayload, group_seq) == 96);
static_assert(offsetof(RecordPayload, reserved) == 104);
static_assert(offsetof(RecordPayload, check) == 112);

// One slot: the seqlock word and the payload as 15 words (copied with relaxed atomics, see above).
struct alignas(64) Record {
  std::atomic<std::uint64_t> stamp;  // 0 = never written; 2*seq+1 writing; 2*seq+2 complete
  std::uint64_t words[15];           // a RecordPayload, bit for bit
};
static_assert(sizeof(Record) == kRecordSize);
static_assert(offsetof(Record, words) == 8);
static_assert(sizeof(Record::words) == sizeof(RecordPayload));
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// Agent -> rank control block, inside the header (the only part of a ring the agent writes). The hook
// reads it with relaxed loads on every call; it is on its own cache lines, written rarely.
inline constexpr std::uint32_t kProfileDevice = 0x1;  // time NCCL calls on the device (CUDA events)

struct RingControl {
  std::atomic<std::uint32_t> profile_flags;     // kProfileDevice, ...
  std::atomic<std::uint32_t> profile_status;    // written by the hook: kProfileStatus*
  std::atomic<std::uint64_t> profile_until_ns;  // CLOCK_MONOTONIC: profiling stops by itself then
  std::atomic<std::uint64_t> profile_request;   // bumped by the agent for each request
  std::atomic<std::uint64_t> timings_dropped;   // calls left untimed (event pool exhausted)
};
inline constexpr std::uint32_t kProfileStatusOff = 0;
inline constexpr std::uint32_t kProfileStatusActive = 1;
inline constexpr std::uint32_t kProfileStatusUnavailable = 2;  // no CUDA runtime in the process
static_assert(sizeof(RingControl) == 32);
static_assert(offsetof(RingControl, profile_flags) == 0);
static_assert(offsetof(RingControl, profile_status) == 4);
static_assert(offsetof(RingControl, profile_until_ns) == 8);
static_assert(offsetof(RingControl, profile_request) == 16);
static_assert(offsetof(RingControl, timings_dropped) == 24);

// The pause gate (docs/validation.md): the framework marks its iterations, the agent arms a pause at a
// consistent cut and steers it, the hook traps, runs the tests it is given and reports here.
//
// Writers: `iteration_mark` and `mark_seq` the framework (libgreyhound_job, greyhound_job_mark_iteration_v1);
// the request (`id` .. `transfers[i]` inputs, `command`) the agent; the state and results the hook. The
// agent writes a new request's fields first and `id` last (release); the hook reads `id` (acquire) first.
// The hook writes results first and `state` last (release), `state_id` naming the request they answer.
inline constexpr int kPauseMaxTransfers = 32;
inline constexpr int kPauseMaxSizes = 4;
inline constexpr int kPauseGemmTypes = 2;  // FP32, FP16

// One P2P transfer of this rank in a pass: a send to or a receive from `peer` (a rank of the group).
struct PauseTransfer {
  std::uint64_t group_id;
  std::int32_t pass;     // the pass (for the report; transfers run in array order)
  std::int32_t peer;     // the other end, as a rank of the group's communicator
  std::int32_t send;     // 1: this rank sends; 0: receives
  std::int32_t reserved;
  double ms[kPauseMaxSizes];  // hook: the median of the repeats per size (device time); 0: not run
};
static_assert(sizeof(PauseTransfer) == 56);

// Commands (agent -> hook) and states (hook -> agent).
inline constexpr std::uint32_t kPauseCmdArm = 1;     // trap at the cut, drain, report kPauseTrapped, wait
inline constexpr std::uint32_t kPauseCmdRun = 2;     // run the tests, report kPauseDone, wait
inline constexpr std::uint32_t kPauseCmdResume = 3;  // resume training
inline constexpr std::uint32_t kPauseCmdAbort = 4;   // resume at once (or never trap)
inline constexpr std::uint32_t kPauseCmdExit = 5;    // (after kPauseDone) end the process: a pre-flight check with
                                                     // fail-on-slow found the job's hardware slow
inline constexpr int kPauseExitStatus = 75;          // ... with this status (EX_TEMPFAIL)
inline constexpr std::uint32_t kPauseIdle = 0;
inline constexpr std::uint32_t kPauseTrapped = 1;   // at the cut, stream drained
inline constexpr std::uint32_t kPauseRunning = 2;
inline constexpr std::uint32_t kPauseDone = 3;      // results written
inline constexpr std::uint32_t kPauseResumed = 4;   // back to training (reason: kPauseWhy*)
inline constexpr std::uint32_t kPauseRefused = 5;   // cannot reach the cut (reason: kPauseWhy*)
inline constexpr std::uint32_t kPauseWhyNone = 0;
inline constexpr std::uint32_t kPauseWhyPast = 1;       // the rank was already past the cut
inline constexpr std::uint32_t kPauseWhyInGroup = 2;    // the cut fell inside ncclGroupStart/End
inline constexpr std::uint32_t kPauseWhyCapturing = 3;  // the stream was capturing a CUDA graph
inline constexpr std::uint32_t kPauseWhyNoCuda = 4;     // no CUDA runtime in the process
inline constexpr std::uint32_t kPauseWhyDeadline = 5;   // resumed by itself at the deadline
inline constexpr std::uint32_t kPauseWhyTold = 6;       // resumed when told
inline constexpr std::uint32_t kPauseWhyAborted = 7;    // the agent aborted the pause
inline constexpr std::uint32_t kPauseWhyNoGroup = 8;    // a group to test is not one of the rank's communicators
inline constexpr std::uint32_t kPauseWhyNoMemory = 9;   // no CUDA events or P2P buffer for the tests
inline constexpr std::uint32_t kPauseWhyCudaError = 10; // a CUDA error of the job was pending, or its work failed

struct PauseControl {
  std::atomic<std::uint64_t> iteration_mark;  // framework: 1 + the iteration it began last; 0: none yet
  std::atomic<std::uint64_t> mark_seq;        // framework: write_index when it was marked
  std::atomic<std::uint64_t> id;              // agent: the request; 0: none
  std::atomic<std::uint32_t> command;         // agent: kPauseCmd*
  std::uint32_t gemm_n;                       // agent: n x n x n GEMMs in FP32 and FP16; 0: none
  std::uint64_t at_iteration;                 // agent: the cut, the first NCCL call of this iteration
  std::uint64_t deadline_ns;                  // agent: CLOCK_MONOTONIC; the hook resumes by itself then
  std::uint32_t repeats;                      // agent: runs of each test (the median is reported)
  std::uint32_t n_sizes;                      // agent: P2P sizes, at most kPauseMaxSizes
  std::uint64_t sizes[kPauseMaxSizes];        // agent: bytes
  std::uint32_t n_transfers;                  // agent: at most kPauseMaxTransfers
  std::uint32_t reason;                       // hook: kPauseWhy*
  std::atomic<std::uint64_t> state_id;        // hook: the request the state answers
  std::atomic<std::uint32_t> state;           // hook: kPause* state
  std::uint32_t reserved0;
  std::uint64_t trapped_ns;                   // hook: CLOCK_MONOTONIC at the trap (after the drain)
  std::uint64_t resumed_ns;                   // hook: ... at the resume
  double drain_ms;                            // hook: the stream drain
  double gemm_ms[kPauseGemmTypes];            // hook: FP32, FP16 GEMM (median, device time); 0: not run
  double gemm_tflops[kPauseGemmTypes];        // hook: the same as throughput
  PauseTransfer transfers[kPauseMaxTransfers];
};
static_assert(offsetof(PauseControl, id) == 16);
static_assert(offsetof(PauseControl, command) == 24);
static_assert(offsetof(PauseControl, at_iteration) == 32);
static_assert(offsetof(PauseControl, state_id) == 96);
static_assert(offsetof(PauseControl, state) == 104);
static_assert(offsetof(PauseControl, transfers) == 168);
static_assert(sizeof(PauseControl) == 168 + 56 * kPauseMaxTransfers);

// The FP8 GEMM of a pause (offset 2496, right after PauseControl): written by the hook with the other
// results (before `state` = kPauseDone, release), for the same request. An FP8 GEMM runs through cuBLASLt
// (A transposed, B not, E4M3 in, BF16 out, FP32 compute: the layout cuBLASLt's FP8 kernels take) on a
// device of compute capability 8.9 or more, whenever the pause runs its FP32 and FP16 GEMMs. Rings of
// hooks older than this field (all zeros) read as not run.
inline constexpr std::uint32_t kGemmFp8NotRun = 0;       // no GEMM asked for or possible (no cuBLAS, no memory
                                                         // for its buffers), or a hook without FP8
inline constexpr std::uint32_t kGemmFp8Done = 1;         // ms and tflops hold the median of the repeats
inline constexpr std::uint32_t kGemmFp8Unsupported = 2;  // the device's compute capability is below 8.9
inline constexpr std::uint32_t kGemmFp8NoLibrary = 3;    // cuBLASLt (or the device query) is not in the process
inline constexpr std::uint32_t kGemmFp8NoAlgorithm = 4;  // cuBLASLt offers no FP8 kernel for it (or n below 16,
                                                         // or a cuBLASLt that does not know FP8)
inline constexpr std::uint32_t kGemmFp8Failed = 5;       // a call failed
inline constexpr std::uint32_t kGemmFp8Skipped = 6;      // the pause's deadline came first
struct PauseGemmFp8 {
  std::uint64_t id;                  // hook: the request these results answer (PauseControl::id)
  std::uint32_t status;              // hook: kGemmFp8*
  std::uint32_t n;                   // hook: n x n x n (the request's gemm_n rounded down to a multiple of 16)
  std::int32_t compute_capability;   // hook: the device's, major * 10 + minor; 0: unknown
  std::uint32_t reserved;
  double ms;                         // hook: median device time of the repeats
  double tflops;                     // hook: the same as throughput
};
static_assert(sizeof(PauseGemmFp8) == 40);
inline constexpr std::size_t kRingPauseFp8Offset = 2496;

// The NCCL call the writer is inside now (offset 3968): a rank blocked in a collective is seen while it waits
// (its record is written only once the call returns). When a recorded call begins the hook takes `writer`
// (an exchange: one thread writes the fields at a time; a call that finds it taken leaves the marker to the
// other thread's call), stores `enter_ns` = 0, then the fields, then `enter_ns` (release), and gives `writer`
// back; when the call returns, `enter_ns` = 0 if it still holds that call's entry time (with several threads
// calling NCCL at once it shows one of their calls, best effort: one that returns at the very moment another
// begins may clear the other's). A reader copies the fields between two loads of `enter_ns` and keeps them
// only when both loads agree and are not 0. (Without `writer`, two threads beginning calls at once could
// leave one call's group beside the other's number under one entry time.)
struct RingInCall {
  std::atomic<std::uint64_t> enter_ns;  // CLOCK_MONOTONIC at the call's entry; 0: in no call
  std::uint64_t group_id;               // its communicator's group (for ncclGroupEnd: the group's last call's)
  std::uint64_t group_seq;              // its number on that communicator (RecordPayload::group_seq; 0: a send
                                        // or receive, or a group of those)
  std::uint32_t op;                     // greyhound::Op
  std::uint32_t tid;
  std::atomic<std::uint32_t> writer;    // 1 while a thread writes the fields (older rings: 0, never taken)
};
inline constexpr std::size_t kRingInCallOffset = 3968;

// How the writer's process ended (offset 4032): the agent tells a rank that died (a fail-stop) from one that
// finished. The hook stores `exit_status` and `exited_ns`, then `exited` = 1 (release), when the process ends
// through exit() or a return from main (glibc's on_exit hands it the status); a process killed by a signal,
// crashed or ended with _exit() leaves `exited` 0. Rings of writers older than this field (all zeros) read
// as never exited.
struct RingLife {
  std::atomic<std::uint32_t> exited;  // 1: the process ended through exit()
  std::int32_t exit_status;           // ... with this status (0: it finished; else it failed, e.g. an exception)
  std::uint64_t exited_ns;            // CLOCK_MONOTONIC at that moment
};
inline constexpr std::size_t kRingLifeOffset = 4032;

// Header of a ring file. Static fields are written once by the creator before `magic` is stored (release);
// a reader that sees the magic sees them.
struct RingHeader {
  std::atomic<std::uint64_t> magic;    // kRingMagic once the ring is ready
  std::uint32_t version;               // kRingVersion
  std::uint32_t header_size;           // kRingHeaderSize
  std::uint32_t record_size;           // kRecordSize
  std::uint32_t reserved0;
  std::uint64_t capacity;              // records; a power of two
  std::int32_t rank;                   // global rank of the writer, -1 when unknown
  std::int32_t local_rank;             // rank on its node, -1 when unknown
  std::int32_t pid;                    // writer process id
  std::int32_t reserved1;
  std::uint64_t created_mono_ns;       // CLOCK_MONOTONIC at creation
  std::uint64_t created_real_ns;       // CLOCK_REALTIME at the same moment (maps t_ns to wall clock)
  char job[kRingJobMax];               // NUL-terminated job name
  char host[kRingHostMax];             // NUL-terminated host name
  std::uint8_t pad0[256 - 192];
  alignas(64) std::atomic<std::uint64_t> write_index;  // next sequence number to reserve
  alignas(64) std::atomic<std::uint64_t> dropped;      // records writers gave up on (see rule above)
  alignas(64) RingControl control;                     // agent -> rank
  std::uint8_t pad1[512 - 384 - sizeof(RingControl)];
  alignas(64) PauseControl pause;                      // framework, agent <-> rank (offset 512)
  alignas(64) PauseGemmFp8 pause_fp8;                  // hook -> agent (offset 2496)
  std::uint8_t reserved_tail[kRingInCallOffset - kRingPauseFp8Offset - sizeof(PauseGemmFp8)];
  alignas(64) RingInCall in_call;                      // the call in progress (offset 3968)
  alignas(64) RingLife life;                           // the writer's end (offset 4032)
  std::uint8_t pad2[kRingHeaderSize - kRingLifeOffset - sizeof(RingLife)];
};
static_assert(offsetof(RingHeader, magic) == 0);
static_assert(offsetof(RingHeader, version) == 8);
static_assert(offsetof(RingHeader, header_size) == 12);
static_assert(offsetof(RingHeader, record_size) == 16);
static_assert(offsetof(RingHeader, capacity) == 24);
static_assert(offsetof(RingHeader, rank) == 32);
static_assert(offsetof(RingHeader, local_rank) == 36);
static_assert(offsetof(RingHeader, pid) == 40);
static_assert(offsetof(RingHeader, created_mono_ns) == 48);
static_assert(offsetof(RingHeader, created_real_ns) == 56);
static_assert(offsetof(RingHeader, job) == 64);
static_assert(offsetof(RingHeader, host) == 128);
static_assert(offsetof(RingHeader, write_index) == 256);
static_assert(offsetof(RingHeader, dropped) == 320);
static_assert(offsetof(RingHeader, control) == 384);
static_assert(offsetof(RingHeader, pause) == 512);
static_assert(offsetof(RingHeader, pause_fp8) == kRingPauseFp8Offset);
static_assert(offsetof(RingHeader, in_call) == kRingInCallOffset);
static_assert(offsetof(RingHeader, life) == kRingLifeOffset);
static_assert(sizeof(RingHeader) == kRingHeaderSize);

// The FP8 results beside a pause block (every PauseControl is a RingHeader's `pause`).
inline PauseGemmFp8& pause_fp8_of(PauseControl& pc) noexcept {
  auto* block = reinterpret_cast<unsigned char*>(&pc);
  return *reinterpret_cast<PauseGemmFp8*>(block + (offsetof(RingHeader, pause_fp8) - offsetof(RingHeader, pause)));
}

// Checksum of payload words 0..13 (word 14 holds it): a sum of products with distinct odd constants,
// finalised by one multiply. The products are independent, so it costs a few cycles on the hot path, and a
// record stitched from two different records passes only if their differences cancel exactly.
inline std::uint64_t record_check(const std::uint64_t* words) noexcept {
  constexpr std::uint64_t k[14] = {
      0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull, 0xd6e8feb86659fd93ull,
      0xa0761d6478bd642full, 0xe7037ed1a0b428dbull, 0x8ebc6af09c88c6e3ull, 0x589965cc75374cc3ull,
      0x1d8e4e27c47d124full, 0xff51afd7ed558ccdull, 0xc4ceb9fe1a85ec53ull, 0x87c37b91114253d5ull,
      0x4cf5ad432745937full, 0x2127599bf4325c37ull};
  std::uint64_t a = 0, b = 0;
#pragma GCC unroll 7
  for (int i = 0; i < 14; i += 2) {
    a += words[i] * k[i];
    b += words[i + 1] * k[i + 1];
  }
  const std::uint64_t h = (a ^ (b >> 17) ^ (b << 47)) * 0x2545f4914f6cdd1dull;
  return h ^ (h >> 31);
}

constexpr std::size_t ring_file_size(std::uint64_t capacity) {
  return kRingHeaderSize + capacity * kRecordSize;
}

}  // namespace greyhound
