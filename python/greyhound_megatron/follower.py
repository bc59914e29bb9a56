"""PlanFollower: the training job's side of greyhound's plans, on libgreyhound_job (no Megatron import).

Rank 0 publishes the job's layout through the job client and reads the latest plan, which the client checks
against the layout (one entry per DP replica, each >= 1, the same global batch, a strategy the job
advertised, a newer epoch). Its decision reaches every rank in one broadcast of a small CPU tensor over a
gloo group at each poll, so all ranks switch at the same iteration; the other ranks read nothing from Redis
(they wait for rank 0's read in the broadcast) and nothing synchronises the GPU. Every rank acknowledges
every new epoch itself.

A new allocation takes effect at the first global batch no data loader has started reading (samplers note
what they hand out, AllocationSchedule), at once when nothing reads ahead.
"""
import logging
import time

from . import _capi
from . import launch
from .allocation import Allocation, AllocationError, AllocationSchedule

log = logging.getLogger("greyhound_megatron")

# What rank 0 broadcasts: [kind, epoch, from_index, counts...].
_NONE, _APPLY, _REJECTED, _UNSUPPORTED, _RESTART = 0, 1, 2, 3, 4
_HEADER = 3
_REASON_BYTES = 1024

_SUPPORTED_CAPABILITIES = ("S2", "S3", "S4")


class PlanFollower:
    """Follows greyhound's plans for one rank of a job.

    job: the greyhound job name (None: GREYHOUND_JOB). dp_size, dp_rank: this rank's data-parallel replica.
    microbatches: the micro-batches of each replica at start, an int (uniform) or one entry per replica.
    capabilities: the strategies the job can apply ("S2"). redis_url: None: GREYHOUND_REDIS, as the daemons.
    rank, world_size: default from torch.distributed (0 and 1 without it); tp_size * dp_size * pp_size must be
    the world size (tp_size defaults to world_size // (dp_size * pp_size)). group: a process group that takes
    CPU tensors (default: the world group when its backend is gloo, else a new gloo group; creating one is a
    collective: construct the follower on every rank at the same point). Every rank calls poll() with the same
    iteration at every iteration boundary. schedule: the AllocationSchedule data loaders read (default: a new
    one, `schedule`). poll_every: read and broadcast the plan at every poll_every-th iteration only (the
    others cost nothing; a plan then waits up to that many iterations). accept: a further check of a new
    allocation, on every rank, callable(counts) -> "" to take it or the reason it cannot be (e.g. a
    schedule's constraint on the count); it must answer the same on every rank. microbatch_multiple: the
    multiple every replica's count must be under the framework's pipeline schedule, told to the master so
    that it plans only such counts (Megatron's interleaved schedule: the pipeline size; its 1F1B without
    interleaving: 1; 0, the default: not said, the master keeps multiples of pp while the counts have them).
    "S3" is applied by a checkpoint-restart with the roles placed anew (the layout says so: s3_by_restart), as
    "S4" is: restart_due, request_restart() and the rest below serve both. placement: the placement this job
    runs, [(rank, tp, dp, pp)] by launch rank (default: what greyhound_megatron.place_rank() took in this
    process, else Megatron's), published as the one it started with. accept_placement: a further check of an
    S3 plan's placement on rank 0, callable(placement) -> "" or why the job cannot restart with it.
    background: the job client does its Redis reads and writes on a thread of its own (the default), so that no
    iteration waits on Redis whatever Redis does; a plan is then taken at the first poll after the client read
    it (every 0.1 s). False: every poll of rank 0 reads Redis itself, with its timeouts (a test that needs a
    plan at a given poll).
    """

    def __init__(self, job, dp_size, dp_rank, microbatches, capabilities=("S2",), redis_url=None, *, rank=None,
                 world_size=None, tp_size=None, pp_size=1, gpus_per_node=0, group=None, lib_path=None,
                 schedule=None, poll_every=1, accept=None, microbatch_multiple=0, placement=None,
                 accept_placement=None, background=True):
        dist = _dist()
        if rank is None:
            rank = dist.get_rank() if dist is not None else 0
        if world_size is None:
            world_size = dist.get_world_size() if dist is not None else 1
        if not isinstance(dp_size, int) or dp_size < 1 or not 0 <= dp_rank < dp_size:
            raise ValueError("greyhound_megatron: dp_rank %r is not within dp_size %r" % (dp_rank, dp_size))
        if tp_size is None:
            tp_size = world_size // (dp_size * pp_size) if world_size % (dp_size * pp_size) == 0 else 0
        if tp_size < 1 or tp_size * dp_size * pp_size != world_size:
            raise ValueError("greyhound_megatron: tp %r x dp %d x pp %d is not the world size %d" %
                             (tp_size, dp_size, pp_size, world_size))
        if isinstance(microbatches, int):
            microbatches = [microbatches] * dp_size
        try:
            initial = Allocation(microbatches)
        except AllocationError as e:
            raise ValueError("greyhound_megatron: microbatches: %s" % e) from None
        if initial.dp_size != dp_size:
            raise ValueError("greyhound_megatron: microbatches has %d entries for %d DP replicas" %
                             (initial.dp_size, dp_size))
        if not isinstance(microbatch_multiple, int) or not 0 <= microbatch_multiple <= 1 << 16:
            raise ValueError("greyhound_megatron: microbatch_multiple must be an integer from 0 to 65536, not %r" %
                             (microbatch_multiple,))
        if microbatch_multiple > 1 and any(n % microbatch_multiple for n in initial.counts):
            raise ValueError("greyhound_megatron: microbatches %s are not multiples of microbatch_multiple %d" %
                             (list(initial.counts), microbatch_multiple))
        if not isinstance(poll_every, int) or poll_every < 1:
            raise ValueError("greyhound_megatron: poll_every must be an integer >= 1, not %r" % (poll_every,))
        self.poll_every = poll_every
        self._accept = accept
        self._accept_placement = accept_placement
        if placement is None:
            took = launch.placed()
            placement = took.placement if took is not None else []
        placement = [tuple(int(v) for v in e) for e in placement]
        if placement and len(placement) != world_size:
            raise ValueError("greyhound_megatron: placement has %d entries for %d ranks" % (len(placement), world_size))
        # The placement in force: launch rank r holds placement[r]'s role (Megatron's when none was given).
        self.placement = sorted(placement) if placement else launch.megatron_placement(tp_size, dp_size, pp_size)
        self._placement_given = bool(placement)
        caps = 0
        for c in capabilities:
            if c not in _SUPPORTED_CAPABILITIES:
                raise ValueError("greyhound_megatron: capability %r is not supported (supported: %s)" %
                                 (c, ", ".join(_SUPPORTED_CAPABILITIES)))
            caps |= _capi.CAPABILITY_BITS[c]

        if world_size > 1 and dist is None:
            raise ValueError("greyhound_megatron: a world of %d ranks needs torch.distributed initialised "
                             "(every rank must take a plan at the same iteration)" % world_size)
        self.rank, self.world_size, self.dp_rank, self.dp_size = rank, world_size, dp_rank, dp_size
        self.tp_size, self.pp_size, self.gpus_per_node = tp_size, pp_size, gpus_per_node
        self.capabilities = tuple(capabilities)
        self._caps = caps
        self._initial = initial
        self._alloc = initial
        self.schedule = schedule if schedule is not None else AllocationSchedule(initial)
        if self.schedule.at(0) != initial:
            raise ValueError("greyhound_megatron: the schedule starts from %s, not %s" % (self.schedule.at(0), initial))
        self._pending = None            # (epoch, from_index, Allocation, picked_up_monotonic)
        self.applied_epoch = 0          # the newest epoch this rank acknowledged (any status)
        self.last_rejection = ""        # why the last bad plan was not taken
        self._restart = None            # a restart to carry out: (epoch, iteration it was picked up at, 3 or 4)
        self._restart_plan = None       # rank 0: that plan (exclusions or placement, reason)
        self._rank0_reason = ""         # rank 0: why the plan it read last is not taken
        self._lib = _capi.load(lib_path)
        self._client = _capi.JobClient(job, redis_url, self._lib, background=background)
        self.job = self._client.name
        rc, err = self._client.set_microbatch_multiple(microbatch_multiple)
        if rc != _capi.OK:
            raise ValueError("greyhound_megatron: microbatch_multiple: %s" % err)
        if self._placement_given:
            rc, err = self._client.set_initial_placement(self.placement)
            if rc != _capi.OK:
                raise ValueError("greyhound_megatron: placement: %s" % err)
        self._layout_due = rank == 0
        self._last_error = ""
        self._group = None
        self._dist = dist
        if world_size > 1:
            self._group = group if group is not None else _cpu_group(dist)
        if self._layout_due:
            self._publish_layout()

    # --- this replica's share of the allocation in force --------------------------------------------------
    @property
    def allocation(self):
        return list(self._alloc.counts)

    def num_microbatches(self):
        return self._alloc.num_microbatches(self.dp_rank)

    def microbatch_offset(self):
        return self._alloc.offset(self.dp_rank)

    def loss_scale(self):
        return self._alloc.loss_scale(self.dp_rank)

    def close(self):
        self._client.close()

    def withdraw_capability(self, capability):
        """Stops advertising `capability` (found unusable after the follower started): rank 0 publishes the
        layout again at its next poll, and plans of it are then acknowledged as unsupported."""
        bit = _capi.CAPABILITY_BITS.get(capability, 0)
        if self._caps & bit:
            self._caps &= ~bit
            self.capabilities = tuple(c for c in self.capabilities if c != capability)
            self._layout_due = self.rank == 0

    # --- S3 and S4: checkpoint and restart ----------------------------------------------------------------------
    @property
    def restart_due(self):
        """The epoch of an S4 plan, or an S3 plan (applied by restarting), the job is to carry out (0: none).
        The framework then calls request_restart() at an iteration boundary, checkpoints when it says so,
        acknowledges with restart_checkpointed(), and exits for its launcher to restart it without what the
        plan excludes (S4) or with the roles it places (S3: each rank calls place_rank() at its start)."""
        return self._restart[0] if self._restart is not None else 0

    @property
    def restart_strategy(self):
        """The strategy of the restart due ("S3" or "S4"; "" when none), the same on every rank."""
        return "S%d" % self._restart[2] if self._restart is not None else ""

    def request_restart(self, iteration):
        """Every rank, at the boundary before `iteration`, with a restart due: rank 0 asks for the restart
        through the job client (with the S4 plan's exclusions or the S3 plan's placement; it also withdraws the
        layout), and tells everyone whether that worked. True: checkpoint and stop now, then
        restart_checkpointed(). False: the plan is acknowledged as rejected and training goes on as it was (a
        job that stopped without its restart request would not come back, or not with its placement)."""
        if self._restart is None:
            raise RuntimeError("greyhound_megatron: no S3 or S4 plan is due")
        epoch = self._restart[0]
        answer = ""  # rank 0's: "ok" or why not
        if self.rank == 0:
            p = self._restart_plan
            if p.strategy == _capi.S4:
                rc, err = self._client.request_restart(0, epoch, "S4 plan %d: %s" % (epoch, p.reason),
                                                       p.exclude_nodes, p.exclude_ranks)
            else:
                rc, err = self._client.request_restart(0, epoch, "S%d plan %d: %s" % (p.strategy, epoch, p.reason),
                                                       placement=p.placement)
            answer = "ok" if rc == _capi.OK else (err or _capi.status_name(rc, self._lib))
            if rc != _capi.OK:
                self._layout_due = True  # the request may have reached Redis, and with it the layout's removal
        reason = self._exchange_reason(answer)
        if reason == "ok":
            self._restart_iteration = iteration
            return True
        self._restart = None
        self.last_rejection = "the restart request failed: %s" % reason
        if self.rank == 0:
            log.warning("greyhound_megatron: plan %d not applied: %s", epoch, self.last_rejection)
        self._ack(epoch, iteration, _capi.ACK_REJECTED, self.last_rejection)
        return False

    def decline_restart(self, iteration, reason):
        """Every rank, with a restart due that the job cannot carry out after all: acknowledged as rejected."""
        if self._restart is None:
            raise RuntimeError("greyhound_megatron: no S3 or S4 plan is due")
        epoch = self._restart[0]
        self._restart = None
        self.last_rejection = reason
        if self.rank == 0:
            log.warning("greyhound_megatron: plan %d not applied: %s", epoch, reason)
        self._ack(epoch, iteration, _capi.ACK_REJECTED, reason)

    def restart_checkpointed(self, detail="", apply_s=0.0):
        """Every rank, once the checkpoint for the restart is written: acknowledges the plan as applied."""
        if self._restart is None:
            raise RuntimeError("greyhound_megatron: no S3 or S4 plan is due")
        epoch = self._restart[0]
        self._restart = None
        self._ack(epoch, self._restart_iteration, _capi.ACK_APPLIED,
                  detail or "checkpoint saved at iteration %d; stopping for the restart" % self._restart_iteration,
                  apply_s)

    # --- the protocol ---------------------------------------------------------------------------------------
    def poll(self, iteration):
        """At the boundary before global batch `iteration` (the same on every rank): picks up a new plan.
        True when a new allocation takes effect here (num_microbatches() and the others changed). It also
        marks the iteration's start for greyhound's validation pause (greyhound_job_mark_iteration_v1)."""
        if iteration >= 0:
            _capi.mark_iteration(iteration, self._lib)  # harmless without greyhound's hook
        if self._pending is not None:
            epoch, start, alloc, t0 = self._pending
            if iteration < start:
                return False
            self._pending = None
            self._switch(epoch, iteration, alloc, t0)
            return True
        if iteration % self.poll_every != 0 or self._restart is not None:
            return False
        header = self._exchange_header()
        kind, epoch, start = header[0], header[1], header[2]  # a restart's: start holds its strategy
        if kind == _NONE or epoch <= self.applied_epoch:
            return False
        self.applied_epoch = epoch
        if kind in (_REJECTED, _UNSUPPORTED):
            reason = self._exchange_reason(self._rank0_reason if self.rank == 0 else "")
            self.last_rejection = reason
            if self.rank == 0:
                log.warning("greyhound_megatron: plan %d not applied: %s", epoch, reason)
            self._ack(epoch, iteration, _capi.ACK_UNSUPPORTED if kind == _UNSUPPORTED else _capi.ACK_REJECTED,
                      reason)
            return False
        if kind == _RESTART:
            self._restart = (epoch, iteration, start)
            if self.rank == 0 and self._restart_plan.strategy == _capi.S4:
                log.warning("greyhound_megatron: S4 plan %d: checkpoint and restart without nodes %s, ranks %s (%s)",
                            epoch, self._restart_plan.exclude_nodes, self._restart_plan.exclude_ranks,
                            self._restart_plan.reason)
            elif self.rank == 0:
                log.warning("greyhound_megatron: S%d plan %d: checkpoint and restart with the roles placed anew (%s)",
                            self._restart_plan.strategy, epoch, self._restart_plan.reason)
            return False
        t0 = time.monotonic()
        why = ""
        alloc = None
        try:  # checked by the job client on rank 0; every rank checks what it received as well
            alloc = Allocation(header[_HEADER:_HEADER + self.dp_size])
            alloc.check_replaces(self._initial)
            why = self._accept(list(alloc.counts)) if self._accept is not None else ""
        except AllocationError as e:
            why = str(e)
        except Exception as e:  # the job's own check failed: the plan is not taken, training goes on
            why = "the job's check raised %s: %s" % (type(e).__name__, e)
        # One collective whatever this rank found: where it starts, and whether any rank turned it down.
        start, turned_down = self._agree_start(iteration, bool(why))
        if turned_down:
            self.last_rejection = "the plan does not fit this job: %s" % (why or "another rank turned it down")
            self._ack(epoch, iteration, _capi.ACK_REJECTED, self.last_rejection)
            return False
        self.schedule.add(start, alloc)
        if start > iteration:
            self._pending = (epoch, start, alloc, t0)
            return False
        self._switch(epoch, iteration, alloc, t0)
        return True

    def _switch(self, epoch, iteration, alloc, t0):
        before = self._alloc
        self._alloc = alloc
        if self.rank == 0:
            self._layout_due = True  # the layout names the allocation in force
            log.info("greyhound_megatron: plan %d in force from iteration %d: micro-batches %s (were %s)", epoch,
                     iteration, list(alloc.counts), list(before.counts))
        detail = "%d of %d micro-batches on DP replica %d from iteration %d (loss scale %.4f)" % (
            alloc.num_microbatches(self.dp_rank), alloc.total, self.dp_rank, iteration, alloc.loss_scale(self.dp_rank))
        self._ack(epoch, iteration, _capi.ACK_APPLIED, detail, time.monotonic() - t0)

    def _ack(self, epoch, iteration, status, detail, apply_s=0.0):
        rc, err = self._client.ack(self.rank, epoch, iteration, status, detail, apply_s)
        if rc != _capi.OK:  # refused (the client queues what it takes): the master times the plan out
            log.warning("greyhound_megatron: rank %d could not acknowledge plan %d: %s", self.rank, epoch, err)

    def _publish_layout(self):
        rc, err = self._client.publish_layout(self.tp_size, self.dp_size, self.pp_size, self._alloc.counts,
                                              self._initial.counts, self._caps, self.gpus_per_node,
                                              self.placement if self._placement_given else ())
        self._layout_due = rc != _capi.OK
        self._note_error(err if self._layout_due else "", "layout not published yet (retried at every poll)")

    def _note_error(self, err, what):
        if err and err != self._last_error:  # once per reason, not once per iteration
            log.warning("greyhound_megatron: %s: %s", what, err)
        self._last_error = err

    def _read_plan(self):
        """Rank 0: the decision to broadcast."""
        header = [0] * (_HEADER + self.dp_size)
        self._rank0_reason = ""
        if self._layout_due:
            self._publish_layout()
        rc, plan = self._client.poll_plan()
        if plan is None:
            if rc < 0:
                self._note_error(self._client.last_error(), "cannot read the plan (training goes on)")
            return header
        if plan.epoch <= 0:  # the plan key could not be read as a plan: reported once, nothing to answer
            log.warning("greyhound_megatron: ignoring the plan key: %s", plan.verdict)
            return header
        header[1] = plan.epoch
        if rc == _capi.OK and plan.strategy == _capi.S4 and plan.action == _capi.ACTION_APPLY:
            header[0] = _RESTART  # advertised S4 (the job client checked): the framework checkpoints and stops
            header[2] = _capi.S4
            self._restart_plan = plan
            return header
        if rc == _capi.OK and plan.placement and sorted(plan.placement) != self.placement:
            # A new placement (S3, or a revert that carries one): this job takes it only by restarting.
            if not self._caps & _capi.CAP_S3_BY_RESTART:
                header[0] = _REJECTED if plan.action == _capi.ACTION_REVERT else _UNSUPPORTED
                self._rank0_reason = "a new placement is applied only by a restart, and this job does not advertise S3"
                return header
            try:
                why = self._accept_placement(plan.placement) if self._accept_placement is not None else ""
            except Exception as e:  # the job's own check failed: the plan is not taken, training goes on
                why = "the job's placement check raised %s: %s" % (type(e).__name__, e)
            if why:
                header[0] = _REJECTED
                self._rank0_reason = why
                return header
            counts = list(plan.microbatches) if plan.microbatches else list(self._alloc.counts)
            if counts != list(self._initial.counts):
                header[0] = _REJECTED  # the restarted job starts from its initial counts, the split would be lost
                self._rank0_reason = ("a restart with a new placement starts from the micro-batches %s: it would "
                                      "drop the split %s" % (list(self._initial.counts), counts))
                return header
            header[0] = _RESTART
            header[2] = _capi.S3
            self._restart_plan = plan
            return header
        if rc == _capi.OK:
            if plan.strategy != _capi.S1 and plan.strategy != _capi.S2 and plan.action != _capi.ACTION_REVERT:
                header[0] = _UNSUPPORTED  # advertised nothing else; defensive
                self._rank0_reason = "strategy S%d is not applied by greyhound_megatron" % plan.strategy
                return header
            current = list(self._alloc.counts)
            counts = plan.microbatches if plan.microbatches else current
            # Only S2 (and a revert, which undoes one) changes the counts, and only while S2 is advertised.
            changes_counts = plan.strategy == _capi.S2 or plan.action == _capi.ACTION_REVERT
            if counts != current and (not changes_counts or not self._caps & _capi.CAP_S2):
                header[0] = _REJECTED
                self._rank0_reason = ("an S%d %s plan changes the micro-batches %s to %s" %
                                      (plan.strategy, "revert" if plan.action == _capi.ACTION_REVERT else "apply",
                                       current, counts) +
                                      ("" if changes_counts else ": only S2 does") +
                                      ("" if self._caps & _capi.CAP_S2 else ": this job does not advertise S2"))
                return header
            if len(counts) != self.dp_size:
                header[0] = _REJECTED
                self._rank0_reason = "%d micro-batch entries for %d DP replicas" % (len(counts), self.dp_size)
                return header
            header[0] = _APPLY
            header[_HEADER:_HEADER + self.dp_size] = counts
        elif rc == _capi.PLAN_STALE:
            header[1] = 0  # older than one seen: nothing to answer
        else:
            header[0] = _UNSUPPORTED if rc == _capi.PLAN_UNSUPPORTED else _REJECTED
            self._rank0_reason = plan.verdict or _capi.status_name(rc, self._lib)
        return header

    # --- collectives (over the CPU group; none with one process) --------------------------------------------
    def _exchange_header(self):
        header = self._read_plan() if self.rank == 0 else [0] * (_HEADER + self.dp_size)
        if self._group is None:
            return header
        import torch
        t = torch.tensor(header, dtype=torch.int64)
        self._dist.broadcast(t, src=0, group=self._group)
        return [int(v) for v in t.tolist()]

    def _exchange_reason(self, reason):
        if self._group is None:
            return reason
        import torch
        raw = _capi.clip_text(reason)[:_REASON_BYTES]
        t = torch.zeros(_REASON_BYTES, dtype=torch.uint8)
        if self.rank == 0 and raw:
            t[:len(raw)] = torch.tensor(list(raw), dtype=torch.uint8)
        self._dist.broadcast(t, src=0, group=self._group)
        return bytes(t.tolist()).rstrip(b"\0").decode("utf-8", "ignore")

    def _agree_start(self, iteration, turned_down):
        """(the first global batch >= iteration that no rank's data loader has started, whether any rank turned
        the plan down): one MAX all-reduce, so that every rank takes the same branch."""
        start = self.schedule.first_free(iteration)
        if self._group is None:
            return start, turned_down
        import torch
        t = torch.tensor([start, 1 if turned_down else 0], dtype=torch.int64)
        self._dist.all_reduce(t, op=self._dist.ReduceOp.MAX, group=self._group)
        return int(t[0]), bool(t[1])


def _dist():
    """torch.distributed when it is initialised, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _cpu_group(dist):
    if dist.get_backend() == "gloo":
        return dist.group.WORLD
    return dist.new_group(backend="gloo")
