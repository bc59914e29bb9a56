"""libgreyhound_job through ctypes: the one implementation of greyhound's plan protocol (include/greyhound/job.h).

Nothing here reads or writes a plan itself; it declares the C API's structs and signatures and wraps a client
in a small class whose methods return (status, value) and never raise on a Redis problem.
"""
import atexit
import ctypes
import os
import weakref

API_VERSION = 1

# Status codes (greyhound/job.h).
OK, NO_PLAN, PLAN_REJECTED, PLAN_UNSUPPORTED, PLAN_STALE = 0, 1, 2, 3, 4
ERR_INVALID, ERR_UNAVAILABLE, ERR_REFUSED, ERR_INTERNAL = -1, -2, -3, -4

CAP_S2, CAP_S3, CAP_S4, CAP_S3_BY_RESTART = 1 << 0, 1 << 1, 1 << 2, 1 << 3
OPEN_BACKGROUND = 1 << 0  # greyhound_job_open_v2
# greyhound_megatron applies S3 by a checkpoint-restart (the model is built for one placement).
CAPABILITY_BITS = {"S2": CAP_S2, "S3": CAP_S3_BY_RESTART, "S4": CAP_S4}

S1, S2, S3, S4 = 1, 2, 3, 4
ACTION_APPLY, ACTION_REVERT = 0, 1
ACK_APPLIED, ACK_UNSUPPORTED, ACK_REJECTED = 0, 1, 2

MAX_TEXT_BYTES = 4096  # an ack's detail, a restart's reason (what the master reads)


class Layout(ctypes.Structure):
    _fields_ = [("tp", ctypes.c_int32), ("dp", ctypes.c_int32), ("pp", ctypes.c_int32), ("world", ctypes.c_int32),
                ("microbatches", ctypes.POINTER(ctypes.c_int32)), ("microbatches_len", ctypes.c_size_t),
                ("initial_microbatches", ctypes.POINTER(ctypes.c_int32)),
                ("initial_microbatches_len", ctypes.c_size_t),
                ("capabilities", ctypes.c_uint32), ("gpus_per_node", ctypes.c_int32)]


class Placement(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("tp", ctypes.c_int32), ("dp", ctypes.c_int32), ("pp", ctypes.c_int32)]


class Plan(ctypes.Structure):
    _fields_ = [("epoch", ctypes.c_int64), ("strategy", ctypes.c_int32), ("action", ctypes.c_int32),
                ("incident", ctypes.c_int64), ("predicted_iteration_s", ctypes.c_double),
                ("microbatches", ctypes.POINTER(ctypes.c_int32)), ("microbatches_len", ctypes.c_size_t),
                ("placement", ctypes.POINTER(Placement)), ("placement_len", ctypes.c_size_t),
                ("exclude_ranks", ctypes.POINTER(ctypes.c_int32)), ("exclude_ranks_len", ctypes.c_size_t),
                ("exclude_nodes", ctypes.POINTER(ctypes.c_int32)), ("exclude_nodes_len", ctypes.c_size_t),
                ("reason", ctypes.c_char_p), ("verdict", ctypes.c_char_p)]


class PlanView:
    """A plan copied out of the client's buffers (which the next poll overwrites)."""

    __slots__ = ("epoch", "strategy", "action", "incident", "predicted_iteration_s", "microbatches", "placement",
                 "exclude_ranks", "exclude_nodes", "reason", "verdict")

    def __init__(self, p):
        self.epoch = int(p.epoch)
        self.strategy = int(p.strategy)
        self.action = int(p.action)
        self.incident = int(p.incident)
        self.predicted_iteration_s = float(p.predicted_iteration_s)
        self.microbatches = [int(p.microbatches[i]) for i in range(p.microbatches_len)]
        self.placement = [(int(e.rank), int(e.tp), int(e.dp), int(e.pp))
                          for e in (p.placement[i] for i in range(p.placement_len))]
        self.exclude_ranks = [int(p.exclude_ranks[i]) for i in range(p.exclude_ranks_len)]
        self.exclude_nodes = [int(p.exclude_nodes[i]) for i in range(p.exclude_nodes_len)]
        self.reason = _text(p.reason)
        self.verdict = _text(p.verdict)

    def __repr__(self):
        return "PlanView(epoch=%d, strategy=S%d, action=%s, microbatches=%s)" % (
            self.epoch, self.strategy, "revert" if self.action == ACTION_REVERT else "apply", self.microbatches)


def _text(raw):
    return raw.decode("utf-8", "replace") if raw else ""


def _ints(values):
    values = list(values)
    return (ctypes.c_int32 * max(1, len(values)))(*values), len(values)


def _placement(entries):
    """A placement (rank, tp, dp, pp) tuples as the C API takes it: (array, length)."""
    entries = list(entries)
    arr = (Placement * max(1, len(entries)))(*[Placement(*map(int, e)) for e in entries])
    return arr, len(entries)


def clip_text(text):
    """`text` as UTF-8 of at most MAX_TEXT_BYTES (cut at a character boundary)."""
    raw = str(text).encode("utf-8", "replace")
    if len(raw) <= MAX_TEXT_BYTES:
        return raw
    return raw[:MAX_TEXT_BYTES].decode("utf-8", "ignore").encode("utf-8")


def find_library():
    """The path of libgreyhound_job.so: GREYHOUND_JOB_LIB, else beside this package in a greyhound checkout or
    install (../../build/lib, ../../lib), else the name for the dynamic loader's search."""
    explicit = os.environ.get("GREYHOUND_JOB_LIB", "")
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    for candidate in (os.path.join(root, "build", "lib", "libgreyhound_job.so"),
                      os.path.join(root, "lib", "libgreyhound_job.so")):
        if os.path.isfile(candidate):
            return candidate
    return "libgreyhound_job.so"


_LIB = None


def load(path=None):
    """Loads (once) and declares the C API. Raises OSError with the path tried when it cannot."""
    global _LIB
    if _LIB is not None and path is None:
        return _LIB
    where = path or find_library()
    try:
        lib = ctypes.CDLL(where)
    except OSError as e:
        raise OSError("greyhound_megatron: cannot load libgreyhound_job (%s): %s; set GREYHOUND_JOB_LIB to its path "
                      "(build/lib/libgreyhound_job.so in a greyhound build)" % (where, e)) from e
    lib.greyhound_job_api_version.restype = ctypes.c_int
    if lib.greyhound_job_api_version() != API_VERSION:
        raise OSError("greyhound_megatron: %s has API version %d, this package speaks %d" %
                      (where, lib.greyhound_job_api_version(), API_VERSION))
    try:
        _declare(lib)
    except AttributeError as e:  # an older library of the same API version, without a call added since
        raise OSError("greyhound_megatron: %s lacks a call this package uses (%s): rebuild libgreyhound_job" %
                      (where, e)) from e
    if path is None:
        _LIB = lib
    return lib


def _declare(lib):
    """The argument and result types of every call this package makes."""
    vp, i32, i64, sz, cp = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_size_t, ctypes.c_char_p
    p_i32 = ctypes.POINTER(ctypes.c_int32)
    lib.greyhound_job_status_name.restype = cp
    lib.greyhound_job_status_name.argtypes = [ctypes.c_int]
    lib.greyhound_job_open_v1.argtypes = [cp, cp, ctypes.POINTER(vp), cp, sz]
    lib.greyhound_job_open_v2.argtypes = [cp, cp, ctypes.c_uint32, ctypes.POINTER(vp), cp, sz]
    lib.greyhound_job_close_v1.argtypes = [vp]
    lib.greyhound_job_close_v1.restype = None
    lib.greyhound_job_last_error_v1.argtypes = [vp]
    lib.greyhound_job_last_error_v1.restype = cp
    lib.greyhound_job_name_v1.argtypes = [vp]
    lib.greyhound_job_name_v1.restype = cp
    lib.greyhound_job_publish_layout_v1.argtypes = [vp, ctypes.POINTER(Layout)]
    lib.greyhound_job_publish_layout_v2.argtypes = [vp, ctypes.POINTER(Layout), ctypes.POINTER(Placement), sz]
    lib.greyhound_job_poll_plan_v1.argtypes = [vp, ctypes.POINTER(Plan)]
    lib.greyhound_job_last_plan_v1.argtypes = [vp, ctypes.POINTER(Plan)]
    lib.greyhound_job_ack_v1.argtypes = [vp, i32, i64, i64, i32, cp]
    lib.greyhound_job_ack_v2.argtypes = [vp, i32, i64, i64, i32, cp, ctypes.c_double]
    lib.greyhound_job_request_restart_v1.argtypes = [vp, i32, i64, cp, p_i32, sz, p_i32, sz]
    lib.greyhound_job_request_restart_v2.argtypes = [vp, i32, i64, cp, p_i32, sz, p_i32, sz,
                                                     ctypes.POINTER(Placement), sz]
    lib.greyhound_job_restart_placement_v1.argtypes = [vp, ctypes.POINTER(Placement), sz, ctypes.POINTER(sz)]
    lib.greyhound_job_set_initial_placement_v1.argtypes = [vp, ctypes.POINTER(Placement), sz]
    lib.greyhound_job_mark_iteration_v1.argtypes = [i64]
    lib.greyhound_job_set_cost_estimate_v1.argtypes = [vp, i32, ctypes.c_double]
    lib.greyhound_job_set_microbatch_multiple_v1.argtypes = [vp, i32]


def status_name(status, lib=None):
    return _text((lib or load()).greyhound_job_status_name(status))


# Clients still open when the interpreter exits are closed first: a background client writes what waits (an
# acknowledgement given just before the process ends) only when it is closed.
_OPEN = weakref.WeakSet()


@atexit.register
def _close_open_clients():
    for client in list(_OPEN):
        client.close()


class JobClient:
    """One libgreyhound_job client (not thread-safe: one per thread, as the C API says). background: its Redis
    I/O on a thread of its own (GREYHOUND_JOB_OPEN_BACKGROUND): no call waits on Redis."""

    def __init__(self, job=None, redis_url=None, lib=None, background=False):
        self._lib = lib or load()
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = self._lib.greyhound_job_open_v2(job.encode() if job else None,
                                             redis_url.encode() if redis_url else None,
                                             OPEN_BACKGROUND if background else 0, ctypes.byref(handle), err,
                                             len(err))
        if rc != OK:
            raise ValueError("greyhound_megatron: cannot open the job client: %s" % _text(err.value))
        self._handle = handle
        _OPEN.add(self)

    def close(self):
        if self._handle is not None and self._handle.value:
            self._lib.greyhound_job_close_v1(self._handle)
        self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    @property
    def name(self):
        return _text(self._lib.greyhound_job_name_v1(self._handle))

    def last_error(self):
        return _text(self._lib.greyhound_job_last_error_v1(self._handle))

    def publish_layout(self, tp, dp, pp, microbatches, initial_microbatches, capabilities, gpus_per_node=0,
                       placement=()):
        """Publishes the layout, with the placement in force ((rank, tp, dp, pp) per launch rank; empty:
        Megatron's). Returns (status, error)."""
        mb, n = _ints(microbatches)
        init, ni = _ints(initial_microbatches)
        layout = Layout(tp=tp, dp=dp, pp=pp, world=tp * dp * pp, microbatches=mb, microbatches_len=n,
                        initial_microbatches=init, initial_microbatches_len=ni, capabilities=capabilities,
                        gpus_per_node=gpus_per_node)
        placed, np_ = _placement(placement)
        rc = self._lib.greyhound_job_publish_layout_v2(self._handle, ctypes.byref(layout), placed, np_)
        return rc, self.last_error()

    def set_initial_placement(self, placement):
        """The placement the job started with (empty: Megatron's), sent with the next layout."""
        placed, n = _placement(placement)
        rc = self._lib.greyhound_job_set_initial_placement_v1(self._handle, placed, n)
        return rc, self.last_error()

    def set_cost_estimate(self, strategy, seconds):
        """The job's own estimate of what applying S3 or S4 (`strategy`) costs it, sent with the next layout.
        Returns (status, error)."""
        rc = self._lib.greyhound_job_set_cost_estimate_v1(self._handle, strategy, float(seconds))
        return rc, self.last_error()

    def set_microbatch_multiple(self, multiple):
        """The multiple every replica's count must be under the job's schedule (0: not said), sent with the next
        layout. Returns (status, error)."""
        rc = self._lib.greyhound_job_set_microbatch_multiple_v1(self._handle, int(multiple))
        return rc, self.last_error()

    def poll_plan(self):
        """(status, PlanView or None): OK a new plan; NO_PLAN nothing new; PLAN_* a bad one (verdict: why)."""
        plan = Plan()
        rc = self._lib.greyhound_job_poll_plan_v1(self._handle, ctypes.byref(plan))
        if rc in (OK, PLAN_REJECTED, PLAN_UNSUPPORTED, PLAN_STALE):
            return rc, PlanView(plan)
        return rc, None

    def ack(self, rank, epoch, iteration, status, detail="", apply_s=0.0):
        rc = self._lib.greyhound_job_ack_v2(self._handle, rank, epoch, iteration, status, clip_text(detail),
                                            float(apply_s))
        return rc, self.last_error()

    def request_restart(self, rank, epoch, reason, exclude_nodes=(), exclude_ranks=(), placement=()):
        """An S4 restart (exclusions), or an S3 one (the placement to restart with). Returns (status, error)."""
        nodes, nn = _ints(exclude_nodes)
        ranks, nr = _ints(exclude_ranks)
        placed, np_ = _placement(placement)
        rc = self._lib.greyhound_job_request_restart_v2(self._handle, rank, epoch, clip_text(reason), nodes, nn,
                                                        ranks, nr, placed, np_)
        return rc, self.last_error()

    def restart_placement(self, expected=1):
        """(status, placement): the placement the job's latest restart request carries, [(rank, tp, dp, pp)]
        by launch rank ([]: none, every rank keeps its own role). `expected`: the entries to make room for
        (a longer placement is read in a second call)."""
        capacity = max(1, int(expected))
        for _ in range(2):
            out = (Placement * capacity)()
            n = ctypes.c_size_t(0)
            rc = self._lib.greyhound_job_restart_placement_v1(self._handle, out, capacity, ctypes.byref(n))
            if rc == ERR_INVALID and n.value > capacity:
                capacity = n.value
                continue
            if rc != OK:
                return rc, []
            return rc, [(int(e.rank), int(e.tp), int(e.dp), int(e.pp)) for e in out[:n.value]]
        return rc, []


def mark_iteration(iteration, lib=None):
    """greyhound_job_mark_iteration_v1: the start of the framework's iteration (a validation pause's cut)."""
    return (lib or load()).greyhound_job_mark_iteration_v1(int(iteration))
