"""Where a restarted job's ranks run: the placement an S3 plan asked for, taken before the framework starts.

Megatron-LM derives every rank's role (tp, dp, pp) from its global rank and builds its model for those roles
once, so greyhound's S3 for such a job is a checkpoint-restart with the roles placed anew (docs/megatron.md):
the plugin asks for the restart with the plan's placement (launch rank r is to hold the role placement[r]
names), checkpoints and exits; the launcher starts the job again as it always does, and each process calls
place_rank() first thing, before torch.distributed or Megatron read RANK. place_rank() reads the placement the
job's latest restart request carries and sets RANK to the global rank of the role its launch rank is to hold
(Megatron's order: tp fastest, then dp, then pp). The process stays where the launcher put it (its node, its
GPU by LOCAL_RANK); GREYHOUND_RANK and GREYHOUND_LAUNCH_RANK keep the launch rank, by which greyhound names
ranks (they stay with the hardware, which is what faults are on).

Every rank must take the same decision or two processes would claim one rank: a placement that does not fit
this launch (another world size, not a permutation of roles) is ignored by every rank alike (logged), and a
Redis that cannot be reached within `timeout_s` is an error (the launcher's next restart tries again), never
a silent fallback to the launch rank. The job name (GREYHOUND_JOB) must name one run: the request of an
earlier run under the same name would be taken too, as its plan acknowledgements are.
"""
import logging
import os
import time

from . import _capi

log = logging.getLogger("greyhound_megatron")

_PLACED = None


class Placed:
    """What place_rank() decided: launch_rank (where the launcher put this process), rank (the global rank it
    runs as), placement ([(rank, tp, dp, pp)] by launch rank; []: Megatron's, every rank its own role)."""

    __slots__ = ("launch_rank", "rank", "placement")

    def __init__(self, launch_rank, rank, placement):
        self.launch_rank, self.rank, self.placement = launch_rank, rank, list(placement)

    def __repr__(self):
        return "Placed(launch_rank=%d, rank=%d, placement=%s)" % (self.launch_rank, self.rank,
                                                                  self.placement or "Megatron's")


def placed():
    """The decision place_rank() took in this process (None when it did not run)."""
    return _PLACED


def megatron_placement(tp, dp, pp):
    """Megatron's placement: launch rank r holds the role of global rank r."""
    world = tp * dp * pp
    return [(r, r % tp, (r // tp) % dp, r // (tp * dp)) for r in range(world)]


def role_rank(placement, launch_rank, world_size):
    """(the global rank whose role `placement` gives launch rank `launch_rank`, "") or (None, why it is not a
    placement of this launch). Pure."""
    if len(placement) != world_size:
        return None, "the placement has %d entries for %d ranks" % (len(placement), world_size)
    if sorted(e[0] for e in placement) != list(range(world_size)):
        return None, "the placement does not name every launch rank once"
    tp = max(e[1] for e in placement) + 1
    dp = max(e[2] for e in placement) + 1
    pp = max(e[3] for e in placement) + 1
    roles = {(e[1], e[2], e[3]) for e in placement}
    if tp * dp * pp != world_size or len(roles) != world_size or min(min(e[1:]) for e in placement) < 0:
        return None, "the placement's roles are not every (tp, dp, pp) of a %d-rank job once" % world_size
    entry = next(e for e in placement if e[0] == launch_rank)
    return entry[1] + tp * (entry[2] + dp * entry[3]), ""


def _env_int(env, name):
    raw = env.get(name, "")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("greyhound_megatron.place_rank: %s=%r is not an integer (the launcher sets it: torchrun, "
                         "srun with RANK exported)" % (name, raw)) from None
    if value < 0:
        raise ValueError("greyhound_megatron.place_rank: %s=%d is negative" % (name, value))
    return value


def place_rank(job=None, redis_url=None, *, environ=None, timeout_s=60.0, lib_path=None):
    """Takes the placement the job's latest restart request carries: sets RANK (and GREYHOUND_RANK,
    GREYHOUND_LAUNCH_RANK to the launch rank) in `environ` (default os.environ) and returns a Placed. Call it in
    every rank before torch.distributed is initialised (and before Megatron parses its arguments). job /
    redis_url: None: GREYHOUND_JOB / GREYHOUND_REDIS. Raises ValueError for a missing RANK / WORLD_SIZE or an
    unusable Redis URL, OSError when libgreyhound_job cannot be loaded, RuntimeError when Redis cannot be read
    within timeout_s (no rank may guess). Calling it again in the same process starts from the launch rank."""
    global _PLACED
    env = os.environ if environ is None else environ
    launch = _env_int(env, "GREYHOUND_LAUNCH_RANK" if env.get("GREYHOUND_LAUNCH_RANK") else "RANK")
    world = _env_int(env, "WORLD_SIZE")
    if launch >= world:
        raise ValueError("greyhound_megatron.place_rank: RANK %d is not below WORLD_SIZE %d" % (launch, world))
    client = _capi.JobClient(job, redis_url, _capi.load(lib_path))
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            rc, placement = client.restart_placement(world)
            if rc == _capi.OK or rc == _capi.ERR_INVALID:
                break
            if time.monotonic() >= deadline:
                raise RuntimeError("greyhound_megatron.place_rank: cannot read the job's restart request within "
                                   "%.0f s (%s): every rank must start with the same placement, so this one does "
                                   "not start" % (timeout_s, client.last_error()))
            time.sleep(0.25)
        if rc == _capi.ERR_INVALID:  # the same unreadable request for every rank: all keep their own roles
            log.warning("greyhound_megatron: the restart request's placement is not used: %s", client.last_error())
            placement = []
    finally:
        client.close()
    rank = launch
    if placement:
        found, why = role_rank(placement, launch, world)
        if found is None:
            log.warning("greyhound_megatron: the restart request's placement is not used: %s", why)
            placement = []
        else:
            rank = found
    env["GREYHOUND_LAUNCH_RANK"] = str(launch)
    env["GREYHOUND_RANK"] = str(launch)
    env["RANK"] = str(rank)
    if rank != launch:
        log.warning("greyhound_megatron: launch rank %d runs as rank %d (the placement of the job's last S3 "
                    "restart)", launch, rank)
    _PLACED = Placed(launch, rank, placement)
    return _PLACED
