/* libgreyhound_job: the training framework's side of greyhound's plan protocol (docs/redis-keys.md: Job
 * layout, Plan, Acknowledgement), as a C API so that C++ (greyhound-minitrain) and Python (ctypes, the
 * Megatron plugin) run the same code.
 *
 * Protocol: rank 0 publishes the job's layout and capabilities (greyhound_job_publish_layout_v1) at start and
 * after every plan it applies, and polls before each iteration (greyhound_job_poll_plan_v1). A plan is
 * checked against the layout before it is handed out: one micro-batch entry per DP replica, every entry >= 1,
 * the same global batch as the allocation in force, a strategy the job advertised (S1 and reverts always
 * pass), a placement that places every rank once (S3), exclusions within the job (S4), and an epoch newer
 * than the last plan taken. A plan that fails is reported once with its reason, never replaces the last
 * good one and advances nothing (a later plan at a lower epoch, the master's next, is still new). The framework then broadcasts its decision to its ranks itself, and every rank acknowledges
 * (greyhound_job_ack_v1) with the iteration from which the plan is in force.
 *
 * Conventions:
 *  - Every function returns a status (GREYHOUND_JOB_OK or another code below); no C++ exception crosses it.
 *    After a call on a client, greyhound_job_last_error_v1() says why it did not succeed ("" when it did;
 *    for a rejected, unsupported or stale plan: the reason).
 *  - Redis is reached with short timeouts (connect 200 ms, command 300 ms) and reconnects by itself with
 *    backoff; GREYHOUND_JOB_ERR_UNAVAILABLE is worth retrying later, never a reason to stop training.
 *  - A client opened with GREYHOUND_JOB_OPEN_BACKGROUND (greyhound_job_open_v2) does all of that on a thread
 *    of its own, so that the training thread never waits on Redis: publish, ack and poll only check their
 *    arguments and move data in memory (see greyhound_job_open_v2). What a framework should use.
 *  - A client is not thread-safe: use one per thread. Different clients are independent.
 *  - Strings and arrays passed in are copied; arrays handed out (in greyhound_job_plan) belong to the client
 *    and stay valid until the next call that fills a plan of the same kind (poll / last) or close.
 *  - Only greyhound_job_* names are exported: the calls on a client are versioned (_v1; a later, incompatible
 *    version adds _v2 names), greyhound_job_api_version() and greyhound_job_status_name() are not.
 *  - Texts passed in (an ack's detail, a restart's reason) must be at most 4096 bytes of valid UTF-8 (what
 *    the master reads); others are refused with GREYHOUND_JOB_ERR_INVALID.
 *  - The first poll of a client starts after the newest epoch the job's ranks have acknowledged as applied,
 *    and leaves the epochs they turned down alone, so a restarted job does not take a plan it already
 *    answered as new.
 */
#ifndef GREYHOUND_JOB_H_
#define GREYHOUND_JOB_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GREYHOUND_JOB_API_VERSION 1

#if defined(__GNUC__)
#define GREYHOUND_JOB_EXPORT __attribute__((visibility("default")))
#else
#define GREYHOUND_JOB_EXPORT
#endif

/* Status codes. >= 0: the call did its work (for a poll, what it found); < 0: it did not. */
enum {
  GREYHOUND_JOB_OK = 0,
  GREYHOUND_JOB_NO_PLAN = 1,           /* poll / last: no plan, or nothing new since the last poll */
  GREYHOUND_JOB_PLAN_REJECTED = 2,     /* poll: a new plan that does not fit this job, or a malformed one */
  GREYHOUND_JOB_PLAN_UNSUPPORTED = 3,  /* poll: a new plan of a strategy this job did not advertise */
  GREYHOUND_JOB_PLAN_STALE = 4,        /* poll: a plan older than the last one taken */
  GREYHOUND_JOB_ERR_INVALID = -1,      /* an argument (or the call order) is not acceptable */
  GREYHOUND_JOB_ERR_UNAVAILABLE = -2,  /* Redis could not be reached or timed out: retry later */
  GREYHOUND_JOB_ERR_REFUSED = -3,      /* Redis answered with an error */
  GREYHOUND_JOB_ERR_INTERNAL = -4      /* a bug or out of memory */
};

/* greyhound_job_open_v2 flags. */
enum { GREYHOUND_JOB_OPEN_BACKGROUND = 1u << 0 };

/* Capabilities a job advertises (bit mask). S1 (ignore) and reverts need none. */
enum {
  GREYHOUND_JOB_CAP_S2 = 1u << 0, /* change micro-batches per DP replica */
  GREYHOUND_JOB_CAP_S3 = 1u << 1, /* re-place ranks (tp, dp, pp roles) */
  GREYHOUND_JOB_CAP_S4 = 1u << 2, /* checkpoint and restart without some ranks or nodes */
  /* S3 applied by a checkpoint-restart with the roles placed anew (implies S3): a framework that places its
   * roles only when it builds its model (Megatron-LM). The master then takes an S3 plan this job
   * acknowledged as applied for a restart in the same shape (layout field "s3_by_restart"); the job asks
   * for it with greyhound_job_request_restart_v2 and its launch reads the placement back
   * (greyhound_job_restart_placement_v1). */
  GREYHOUND_JOB_CAP_S3_BY_RESTART = 1u << 3
};

/* Plan strategy (1..4 = S1..S4) and action. */
enum { GREYHOUND_JOB_S1 = 1, GREYHOUND_JOB_S2 = 2, GREYHOUND_JOB_S3 = 3, GREYHOUND_JOB_S4 = 4 };
enum { GREYHOUND_JOB_ACTION_APPLY = 0, GREYHOUND_JOB_ACTION_REVERT = 1 };

/* Acknowledgement status. */
enum { GREYHOUND_JOB_ACK_APPLIED = 0, GREYHOUND_JOB_ACK_UNSUPPORTED = 1, GREYHOUND_JOB_ACK_REJECTED = 2 };

typedef struct greyhound_job_client greyhound_job_client; /* opaque */

/* The job's parallel layout (Megatron order: rank = tp + TP * (dp + DP * pp)). */
typedef struct greyhound_job_layout {
  int32_t tp, dp, pp, world;                /* world = tp * dp * pp */
  const int32_t* microbatches;              /* in force, by DP index: dp entries, each >= 1 */
  size_t microbatches_len;
  const int32_t* initial_microbatches;      /* what the job started with; NULL / 0: the same as microbatches */
  size_t initial_microbatches_len;
  uint32_t capabilities;                    /* GREYHOUND_JOB_CAP_* */
  int32_t gpus_per_node;                    /* 0: unknown */
} greyhound_job_layout;

/* One rank's role in an S3 placement. */
typedef struct greyhound_job_placement {
  int32_t rank, tp, dp, pp;
} greyhound_job_placement;

typedef struct greyhound_job_plan {
  int64_t epoch;                   /* 0: none could be read (a malformed plan key naming no epoch newer than
                                      the last seen; a malformed one that does is rejected under its epoch) */
  int32_t strategy;                /* GREYHOUND_JOB_S1..S4 (0: unknown) */
  int32_t action;                  /* GREYHOUND_JOB_ACTION_* */
  int64_t incident;                /* -1: none */
  double predicted_iteration_s;    /* the master's prediction; 0: none */
  const int32_t* microbatches;     /* by DP index; 0 entries: unchanged */
  size_t microbatches_len;
  const greyhound_job_placement* placement; /* S3: one per rank; 0 entries: unchanged */
  size_t placement_len;
  const int32_t* exclude_ranks;    /* S4 */
  size_t exclude_ranks_len;
  const int32_t* exclude_nodes;    /* S4 */
  size_t exclude_nodes_len;
  const char* reason;              /* the master's reason */
  const char* verdict;             /* why this job does not take it; "" when it does */
} greyhound_job_plan;

/* GREYHOUND_JOB_API_VERSION of the library. */
GREYHOUND_JOB_EXPORT int greyhound_job_api_version(void);
/* A constant name for a status code ("ok", "no_plan", ..., "unknown"). */
GREYHOUND_JOB_EXPORT const char* greyhound_job_status_name(int status);

/* Opens a client for `job` (NULL: GREYHOUND_JOB, as greyhound reads it) and Redis at `redis_url` (NULL or "":
 * GREYHOUND_REDIS and GREYHOUND_REDIS_PASSWORD_FILE). Connects lazily: an absent Redis is not an error here.
 * ERR_INVALID for a job name Redis keys cannot carry (empty, over 63 bytes, or a character outside
 * A-Z a-z 0-9 _ . -): refused with the reason, not rewritten. On failure *out is NULL and `error` (if not NULL)
 * holds the reason, truncated to error_len. */
GREYHOUND_JOB_EXPORT int greyhound_job_open_v1(const char* job, const char* redis_url, greyhound_job_client** out,
                                               char* error, size_t error_len);
/* The same, with `flags` (0: as greyhound_job_open_v1; other bits than GREYHOUND_JOB_OPEN_* are ERR_INVALID).
 * GREYHOUND_JOB_OPEN_BACKGROUND: every Redis read and write runs on a thread the client starts, and no call on
 * the training thread waits on Redis (the job never waits on greyhound, whatever Redis does):
 *  - publish_layout checks the layout (ERR_INVALID as before) and returns OK: the thread writes it (the latest
 *    one, retried while Redis is away) and judges plans against it from then on;
 *  - ack checks its arguments (ERR_INVALID as before) and returns OK: the thread writes the acknowledgements in
 *    order; while Redis cannot be reached they wait (at most 4096; past that the oldest is dropped), and one
 *    Redis refuses (an error reply) is reported and dropped;
 *  - poll_plan hands out the next plan the thread read and judged (every 100 ms while none waits to be taken;
 *    after a plan is taken, once the next layout is published or 2 s have passed), with the same codes and
 *    verdicts, checked again against the latest layout when one was published since; ERR_UNAVAILABLE /
 *    ERR_REFUSED, at once, for the thread's latest failed read or write, once;
 *  - request_restart stays synchronous (it first writes what waits), restart_placement is one synchronous read;
 *  - close writes what waits (trying Redis at once, giving up at the first write it does not take) and stops
 *    the thread. A process that ends without closing the client (killed) loses what waits.
 * A plan therefore reaches the job up to one poll interval later than a synchronous poll would read it. */
GREYHOUND_JOB_EXPORT int greyhound_job_open_v2(const char* job, const char* redis_url, uint32_t flags,
                                               greyhound_job_client** out, char* error, size_t error_len);
GREYHOUND_JOB_EXPORT void greyhound_job_close_v1(greyhound_job_client* client); /* NULL: no-op */
/* Why the client's last call did not succeed ("" when it did). Valid until the next call on the client. */
GREYHOUND_JOB_EXPORT const char* greyhound_job_last_error_v1(const greyhound_job_client* client);
/* The job name. */
GREYHOUND_JOB_EXPORT const char* greyhound_job_name_v1(const greyhound_job_client* client);

/* Publishes the layout (key "layout") and makes it the reference plans are checked against, even when the
 * write fails (GREYHOUND_JOB_ERR_UNAVAILABLE: call again later). ERR_INVALID: a layout that is not one. */
GREYHOUND_JOB_EXPORT int greyhound_job_publish_layout_v1(greyhound_job_client* client,
                                                         const greyhound_job_layout* layout);

/* The same, naming the placement in force (key "layout", field "placement"): `placement` one entry per rank
 * in launch-rank order, each rank and each (tp, dp, pp) role once, whole TP groups per node when
 * gpus_per_node is known; NULL / 0: Megatron's (launch rank r holds the role of global rank r). A job that
 * applied an S3 plan publishes the placement it now runs. Plans are checked against this layout. */
GREYHOUND_JOB_EXPORT int greyhound_job_publish_layout_v2(greyhound_job_client* client,
                                                         const greyhound_job_layout* layout,
                                                         const greyhound_job_placement* placement,
                                                         size_t placement_len);

/* The job's own estimate of what applying `strategy` (GREYHOUND_JOB_S3 or GREYHOUND_JOB_S4) costs it, in job
 * seconds (S3: new communicators and the handover of state; S4: checkpoint, restart and reload), sent with
 * every layout published from then on (field "cost_estimates_s"); 0 withdraws it. The master weighs the
 * remedy by it instead of its configured overhead (for S3: until the job has acknowledged a switch with the
 * apply_s it measured). ERR_INVALID: another strategy, or a value that is not finite, is negative or is over
 * a week. Publish the layout again for a new estimate to reach the master. */
GREYHOUND_JOB_EXPORT int greyhound_job_set_cost_estimate_v1(greyhound_job_client* client, int32_t strategy,
                                                            double seconds);

/* The multiple every replica's micro-batch count must be under the job's pipeline schedule, sent with every
 * layout published from then on (field "microbatch_multiple"): Megatron's interleaved schedule needs the
 * pipeline size, its 1F1B without interleaving any count (1). 0 (the default) says nothing: the master then
 * keeps multiples of the pipeline size while the allocation in force has them. Plans whose counts are not
 * multiples of it are rejected; a layout whose counts are not is refused (ERR_INVALID when it is published).
 * It takes effect with the next layout published: until then plans are checked against the last one. Set it
 * before the first publish (a job's schedule does not change while it runs). ERR_INVALID here: a value below 0
 * or above 65536. */
GREYHOUND_JOB_EXPORT int greyhound_job_set_microbatch_multiple_v1(greyhound_job_client* client, int32_t multiple);

/* The placement the job started with (layout field "initial_placement"; what a revert restores), sent with
 * every layout published from then on: a job restarted by an S3 plan (GREYHOUND_JOB_CAP_S3_BY_RESTART) runs
 * the plan's placement as its own. Entries as for greyhound_job_publish_layout_v2; NULL / 0: Megatron's (the
 * default). Checked with the next layout (ERR_INVALID there when it is not a placement of it); here only
 * ERR_INVALID for NULL with a non-zero length. */
GREYHOUND_JOB_EXPORT int greyhound_job_set_initial_placement_v1(greyhound_job_client* client,
                                                                const greyhound_job_placement* placement,
                                                                size_t placement_len);

/* Reads the latest plan and checks it. OK: a new plan to apply (*out filled, kept as the last good one);
 * NO_PLAN: nothing new; PLAN_REJECTED / PLAN_UNSUPPORTED / PLAN_STALE: *out holds what could be read and
 * out->verdict the reason (each bad plan is reported once). ERR_INVALID before any layout was published. */
GREYHOUND_JOB_EXPORT int greyhound_job_poll_plan_v1(greyhound_job_client* client, greyhound_job_plan* out);
/* The last plan that passed the check: OK (*out filled) or NO_PLAN. */
GREYHOUND_JOB_EXPORT int greyhound_job_last_plan_v1(greyhound_job_client* client, greyhound_job_plan* out);

/* Acknowledges plan `epoch` for `rank` (hash "plan:acks"): `status` GREYHOUND_JOB_ACK_*, `iteration` the
 * job's iteration from which it is in force (-1: unknown), `detail` a sentence (NULL: none). */
GREYHOUND_JOB_EXPORT int greyhound_job_ack_v1(greyhound_job_client* client, int32_t rank, int64_t epoch,
                                              int64_t iteration, int32_t status, const char* detail);

/* The same, with `apply_s`: the job time (s, >= 0) this rank spent applying the plan (S3: new communicators
 * and the handover of state; 0: not measured), so that the master can charge the strategy what it cost. */
GREYHOUND_JOB_EXPORT int greyhound_job_ack_v2(greyhound_job_client* client, int32_t rank, int64_t epoch,
                                              int64_t iteration, int32_t status, const char* detail, double apply_s);

/* Asks for an S4 checkpoint-restart without the nodes / ranks given (key "restart"): `epoch` the S4 plan it
 * answers (0: the job's own decision). Arrays may be NULL when their length is 0. */
GREYHOUND_JOB_EXPORT int greyhound_job_request_restart_v1(greyhound_job_client* client, int32_t rank, int64_t epoch,
                                                          const char* reason, const int32_t* exclude_nodes,
                                                          size_t exclude_nodes_len, const int32_t* exclude_ranks,
                                                          size_t exclude_ranks_len);

/* The same, also for S3 by restart: `placement` (NULL / 0: none) the S3 plan's placement to restart with,
 * one entry per launch rank, checked against the layout last published (ERR_INVALID before one, or for a
 * placement that is not one of it, or with exclusions beside it: an S3 restart keeps every node). The
 * request (key "restart", field "placement") is what the restarted job's launch reads back. */
GREYHOUND_JOB_EXPORT int greyhound_job_request_restart_v2(greyhound_job_client* client, int32_t rank, int64_t epoch,
                                                          const char* reason, const int32_t* exclude_nodes,
                                                          size_t exclude_nodes_len, const int32_t* exclude_ranks,
                                                          size_t exclude_ranks_len,
                                                          const greyhound_job_placement* placement,
                                                          size_t placement_len);

/* The placement the job's latest restart request carries (key "restart"), for the launch of a restarted
 * job: launch rank r is to run the role out[r] names. OK with *len entries (0: no request, or one without a
 * placement: every rank keeps its own role); ERR_INVALID when `capacity` is too small (*len: the entries
 * needed; `out` may be NULL with `capacity` 0 to ask), `len` is NULL, or the request cannot be read
 * (last_error says why); ERR_UNAVAILABLE when Redis is away. The job name must name one run: a request of an
 * earlier run under the same name would be read too (as its acknowledgements are, for plan epochs). */
GREYHOUND_JOB_EXPORT int greyhound_job_restart_placement_v1(greyhound_job_client* client,
                                                            greyhound_job_placement* out, size_t capacity,
                                                            size_t* len);

/* Marks the start of the framework's iteration `iteration` (>= 0) in this process's greyhound ring: call it
 * at every iteration boundary, before the iteration's first NCCL call. It gives a validation pause its
 * consistent cut (docs/validation.md): every rank traps at the first NCCL call of the same iteration. Needs
 * no client and no Redis; after the ring is found (once, by this process's pid, in GREYHOUND_SHM_DIR for
 * GREYHOUND_JOB) it is two stores. GREYHOUND_JOB_ERR_UNAVAILABLE when the process has no ring (no NCCL call
 * yet, or greyhound is not loaded or disabled): harmless, try again at the next boundary (the search is
 * repeated at most once a second); GREYHOUND_JOB_ERR_INVALID for a negative iteration. Thread-safe. */
GREYHOUND_JOB_EXPORT int greyhound_job_mark_iteration_v1(int64_t iteration);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // GREYHOUND_JOB_H_
