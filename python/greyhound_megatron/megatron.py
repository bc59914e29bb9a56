"""The Megatron-LM adapter: greyhound's S2 plans (micro-batches per DP replica) applied by pretrain_gpt.py.

    from greyhound_megatron.megatron import install
    install()          # before pretrain(...): it hooks Megatron's own functions, then does its work lazily
    pretrain(...)

What install() changes (docs/megatron.md):
  - megatron.training.training.train_step: before each step every rank polls the plan follower at the global
    batch about to be trained (args.consumed_train_samples // global batch size, also marked for greyhound's
    validation pause); the step's pipeline schedule (the forward_backward_func train_step is given) runs this
    replica's count of micro-batches (the same on every TP/PP/CP rank of the replica), and each micro-batch
    loss is multiplied by dp * N_d / sum(N) (not with --calculate-per-token-loss, where the token counts
    weight it already);
  - nothing else sees the replica's count: get_num_microbatches() answers Megatron's uniform count everywhere,
    so the learning-rate and weight-decay scheduler's increment, consumed_train_samples, FLOPs, the logged
    batch size and checkpoint metadata are the global batch's on every rank;
  - megatron.training.training.build_train_valid_test_data_loaders: the training loader's
    MegatronPretrainingSampler is replaced by ReplicaBatchSampler (the same order while the split is uniform);
    validation and test loaders are left alone.
With "S4" among the capabilities (and --save set), an S4 plan stops the job at the next step boundary: rank
0 asks for the restart through the job client; then train_step returns without running the step, with
Megatron's own should_checkpoint / should_exit / exit_code flags, so that its loop writes the checkpoint
(megatron.training.training.save_checkpoint_and_time; with --async-save, once maybe_finalize_async_save has
finished it, blocking) and every rank acknowledges once it is durable, then exits with restart_exit_code for
the launcher to restart it without what the plan excludes.
With "S3" (and --save, gpus_per_node, and greyhound_megatron.place_rank() run at the process's start) an S3
plan takes the same path, the restart request carrying the plan's placement: the launcher starts the job
again as always and place_rank() gives each process the rank of the role its launch rank is to hold.
A configuration it cannot serve (S2: a micro-batch count that is fixed or moves under it: batch-size
schedules, CUDA graphs that capture the count, iteration skipping; a cyclic or external data loader, MoE,
multi-token prediction; for S3 and S4 no --save; for S3 also context parallelism or another rank order than
tp-dp-pp) keeps training unchanged and does not advertise the remedy: its plans are then acknowledged as
unsupported.
"""
import os
import functools
import importlib
import inspect
import logging
import time

from . import launch
from .allocation import Allocation, AllocationSchedule
from .follower import PlanFollower
from .sampler import ReplicaBatchSampler

log = logging.getLogger("greyhound_megatron")

# What the adapter uses of Megatron-LM: module -> names.
REQUIRED = (
    ("megatron.core.num_microbatches_calculator", ("get_num_microbatches", "_GLOBAL_NUM_MICROBATCHES_CALCULATOR")),
    ("megatron.core.parallel_state", ("get_data_parallel_rank", "get_data_parallel_world_size",
                                      "get_pipeline_model_parallel_world_size")),
    ("megatron.training", ("get_args",)),
    ("megatron.training.training", ("train_step", "build_train_valid_test_data_loaders")),
    ("megatron.training.datasets.data_samplers", ("MegatronPretrainingSampler",)),
)

_INSTALLED = None

# The strategies this adapter applies by a checkpoint-restart (both need --save and Megatron's
# save_checkpoint_and_time).
_BY_RESTART = ("S3", "S4")

# The only micro-batch calculator under which the count is Megatron's for the whole run
# (megatron/core/num_microbatches_calculator.py: the ramp-up and step-schedule calculators move it).
_CONSTANT_CALCULATOR = "ConstantNumMicroBatchesCalculator"

# The argument names the S2 checks read, by what they mean (Megatron-LM's args namespace; each supported version
# names a setting by one of them; the conformance test checks them against a checkout's source).
S2_ARGUMENTS = {
    "step batch-size schedule": ("step_batch_size_schedule",),   # main (megatron-core 0.18 on)
    "batch-size ramp-up": ("rampup_batch_size",),                # honoured up to core_r0.17, ignored after
    "CUDA graphs": ("cuda_graph_impl", "cuda_graph_scope", "cuda_graph_modules"),
    "iteration skipping": ("iterations_to_skip",),
    "data loader": ("dataloader_type",),
    "MoE": ("num_experts",),
    "multi-token prediction": ("mtp_num_layers",),
    "MoE overlap": ("overlap_moe_expert_parallel_comm",),
}


class MegatronMissing(RuntimeError):
    """The installed Megatron-LM lacks what the adapter needs (the message says what)."""


def _import_megatron():
    mods = {}
    for name, attrs in REQUIRED:
        try:
            mod = importlib.import_module(name)
        except ImportError as e:
            raise MegatronMissing("greyhound_megatron.megatron: cannot import %s (%s): install() needs Megatron-LM "
                                  "with megatron.core and megatron.training (core_r0.12 or later layout)" %
                                  (name, e)) from e
        missing = [a for a in attrs if not hasattr(mod, a)]
        if missing:
            raise MegatronMissing("greyhound_megatron.megatron: the installed Megatron-LM's %s has no %s: this "
                                  "adapter needs %s" % (name, ", ".join(missing), ", ".join(attrs)))
        mods[name] = mod
    return mods


class _ReplicaSchedule:
    """Megatron's pipeline schedule (the forward_backward_func a train_step is given) running this replica's
    count of micro-batches: train_step passes num_microbatches=get_num_microbatches() by keyword (every
    schedule in megatron.core.pipeline_parallel.schedules takes its arguments by keyword only), and only the
    schedule is told the replica's count, so nothing else in or around train_step sees it."""

    def __init__(self, inner, count):
        self._inner = inner
        self._count = count

    def __call__(self, *args, **kwargs):
        if "num_microbatches" in kwargs:
            kwargs["num_microbatches"] = self._count
        return self._inner(*args, **kwargs)

    def __getattr__(self, name):  # anything else asked of it is the wrapped schedule's
        return getattr(self._inner, name)


def _positional_index(func, name):
    """The index of parameter `name` among func's positional parameters after the first (the forward_step_func
    the adapter's train_step takes apart), or None where func has no such parameter or cannot be read."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    for i, p in enumerate(params):
        if p.name == name and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            return i - 1
    return None


def _scaled_loss(loss_func, scale, per_token, *args, **kwargs):
    outputs = loss_func(*args, **kwargs)
    if kwargs.get("non_loss_data"):
        return outputs
    if isinstance(outputs, tuple):
        if len(outputs) == 3 and per_token:
            return outputs  # summed over tokens, divided by the global token count: weighted already
        return (outputs[0] * scale,) + tuple(outputs[1:])
    return outputs * scale


class MegatronAdapter:
    def __init__(self, mods, job, capabilities, redis_url, gpus_per_node, poll_every, restart_exit_code):
        self._calc_mod = mods["megatron.core.num_microbatches_calculator"]
        self._mpu = mods["megatron.core.parallel_state"]
        self._get_args = mods["megatron.training"].get_args
        self._training = mods["megatron.training.training"]
        self._sampler_cls = mods["megatron.training.datasets.data_samplers"].MegatronPretrainingSampler
        self._job, self._redis_url, self._gpus_per_node, self._poll_every = job, redis_url, gpus_per_node, poll_every
        self._capabilities = tuple(capabilities)
        self._restart_exit_code = restart_exit_code
        self.refused = {}  # capability -> why it is not advertised
        self.follower = None
        self.schedule = None
        self._step_result_len = None  # how many values this Megatron's train_step returns (learnt from one)
        self._saving_for_restart = None  # the monotonic time a restart's stop began, until its checkpoint is durable
        self._restart_saved = False  # the restart's save_checkpoint_and_time returned (asynchronous: not yet durable)
        self._restarts = tuple(c for c in self._capabilities if c in _BY_RESTART)
        self._orig_train_step = self._training.train_step
        # Where train_step takes its pipeline schedule (core_r0.14 on: its 7th parameter).
        self._schedule_index = _positional_index(self._orig_train_step, "forward_backward_func")
        self._orig_build_loaders = self._training.build_train_valid_test_data_loaders
        self._training.train_step = self.train_step
        self._training.build_train_valid_test_data_loaders = self.build_train_valid_test_data_loaders
        self._orig_save = getattr(self._training, "save_checkpoint_and_time", None)
        self._orig_finalize = getattr(self._training, "maybe_finalize_async_save", None)
        if self._restarts:
            self._training.save_checkpoint_and_time = self.save_checkpoint_and_time
            if self._orig_finalize is not None:
                self._training.maybe_finalize_async_save = self.maybe_finalize_async_save

    def uninstall(self):
        self._training.train_step = self._orig_train_step
        self._training.build_train_valid_test_data_loaders = self._orig_build_loaders
        if self._restarts:
            self._training.save_checkpoint_and_time = self._orig_save
            if self._orig_finalize is not None:
                self._training.maybe_finalize_async_save = self._orig_finalize
        if self.follower is not None:
            self.follower.close()

    # --- set-up, on first use (Megatron is initialised by then) --------------------------------------------
    def _refuse(self, why, capability="S2"):
        if capability in self._capabilities and capability not in self.refused:
            self.refused[capability] = why
            log.warning("greyhound_megatron: %s not advertised: %s (training goes on unchanged)", capability, why)

    def _check_s2_config(self, args):
        """Configurations where an uneven split would change the training or hang it: S2 is not advertised.
        Every one whose micro-batch count is fixed or moves under the plugin is among them: the split keeps the
        count Megatron started with, and only the schedule may run another."""
        calc = self._calc_mod._GLOBAL_NUM_MICROBATCHES_CALCULATOR
        calc_kind = type(calc).__name__
        if getattr(args, "step_batch_size_schedule", None):
            self._refuse("--step-batch-size-schedule changes the global batch during training")
        if getattr(args, "rampup_batch_size", None) and calc_kind != _CONSTANT_CALCULATOR:
            # Deprecated and ignored (a constant calculator) from megatron-core 0.18 on; honoured before.
            self._refuse("--rampup-batch-size changes the global batch during training")
        if calc_kind != _CONSTANT_CALCULATOR:
            self._refuse("Megatron's micro-batch calculator is %s, not %s: the count moves during training" %
                         (calc_kind, _CONSTANT_CALCULATOR))
        if self._schedule_index is None:
            self._refuse("this Megatron-LM's train_step takes no forward_backward_func, the schedule the replica's "
                         "count is given to")
        why = _graphs_capture_count(args, self._mpu.get_pipeline_model_parallel_world_size())
        if why:
            self._refuse(why)
        if list(getattr(args, "iterations_to_skip", None) or []):
            self._refuse("--iterations-to-skip: Megatron's skipped step pulls the uniform count of micro-batches "
                         "from the data iterator, which hands this replica its own")
        if getattr(args, "dataloader_type", "single") not in (None, "single"):
            self._refuse("--dataloader-type %s (only Megatron's single-pass sampler is replaced)" %
                         args.dataloader_type)
        if getattr(args, "num_experts", None):
            self._refuse("a MoE model (expert-parallel all-to-alls pair micro-batches across DP replicas, and the "
                         "auxiliary losses are weighted per replica)")
        if getattr(args, "mtp_num_layers", None):
            self._refuse("multi-token prediction (its loss is weighted per replica)")

    def _check_schedule(self, forward_backward_func):
        """The schedule train_step is given, at the first step (before anything is advertised): one that replays
        a captured iteration runs the captured count whatever it is told."""
        if type(forward_backward_func).__name__ == "FullCudaGraphWrapper":
            self._refuse("full-iteration CUDA graphs replay the captured micro-batch count")

    def _ensure_schedule(self):
        if self.schedule is None:
            args = self._get_args()
            self._check_s2_config(args)
            self.schedule = AllocationSchedule(Allocation.uniform(self._mpu.get_data_parallel_world_size(),
                                                                  self._calc_mod.get_num_microbatches()))
        return self.schedule

    def _ensure_follower(self):
        if self.follower is not None:
            return
        import torch.distributed as dist
        schedule = self._ensure_schedule()
        dp, pp = self._mpu.get_data_parallel_world_size(), self._mpu.get_pipeline_model_parallel_world_size()
        world = dist.get_world_size() if dist.is_initialized() else 1
        args = self._get_args()
        self._check_restart_config(args)
        self._check_s3_config(args)
        multiple, why = self._declared_multiple(pp, list(schedule.at(0).counts))
        if why:
            self._refuse(why)
        caps = tuple(c for c in self._capabilities if c not in self.refused)
        took = launch.placed()
        self.follower = PlanFollower(self._job, dp, self._mpu.get_data_parallel_rank(), list(schedule.at(0).counts),
                                     caps, self._redis_url, tp_size=world // (dp * pp), pp_size=pp,
                                     gpus_per_node=self._gpus_per_node, schedule=schedule,
                                     poll_every=self._poll_every, accept=self._accept,
                                     microbatch_multiple=multiple,
                                     placement=took.placement if took is not None else [],
                                     accept_placement=self._accept_placement)

    def _check_restart_config(self, args):
        """What S3 and S4 need: a directory to checkpoint to, and a way to tell when the checkpoint is durable."""
        for c in self._restarts:
            if not getattr(args, "save", None):
                self._refuse("no --save directory for the checkpoint", c)
            if getattr(args, "async_save", False) and self._orig_finalize is None:
                self._refuse("--async-save, and this Megatron-LM's training module has no maybe_finalize_async_save "
                             "to tell when the checkpoint is durable", c)

    def _check_s3_config(self, args):
        """What S3 by restart needs: the placement read back at the restart, nodes to place on, Megatron's
        rank order tp-dp-pp (place_rank computes the rank of a role in it)."""
        if "S3" not in self._capabilities:
            return
        if launch.placed() is None:
            self._refuse("greyhound_megatron.place_rank() did not run at this process's start: a restart could not "
                         "take a new placement", "S3")
        if not self._gpus_per_node:
            self._refuse("gpus_per_node is not given (a placement is planned on whole nodes)", "S3")
        if (getattr(args, "context_parallel_size", 1) or 1) > 1:
            self._refuse("context parallelism (place_rank knows the rank order tp-dp-pp only)", "S3")
        if (getattr(args, "expert_model_parallel_size", 1) or 1) > 1 or getattr(args, "use_tp_pp_dp_mapping", False):
            self._refuse("another rank order than tp-dp-pp (place_rank computes the rank of a role in it)", "S3")
        if _device_from_rank():
            self._refuse("this Megatron-LM sets each process's GPU from its rank (args.rank % device_count), so a "
                         "rank placed on another GPU would not start", "S3")

    def _accept_placement(self, placement):
        """Rank 0, for an S3 plan: the process of global rank 0 hosts torch.distributed's store unless the
        launcher's agent does (torchrun), so without torchrun role 0 stays on launch rank 0."""
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "") == "True":
            return ""
        launch_of_role0 = next((e[0] for e in placement if tuple(e[1:]) == (0, 0, 0)), 0)
        if launch_of_role0 != 0:
            return ("the placement moves global rank 0 to launch rank %d, and without torchrun's agent store the "
                    "process of rank 0 hosts torch.distributed's store at MASTER_ADDR" % launch_of_role0)
        return ""

    def _declared_multiple(self, pp, counts):
        """(the multiple to tell the master, why S2 cannot be offered or ""). A schedule that runs counts its
        constraint does not divide (newer Megatron-core groups micro-batches otherwise) gets no split."""
        multiple = self._microbatch_multiple(pp)
        if multiple > 1 and any(n % multiple for n in counts):
            return 0, ("the interleaved pipeline schedule runs %s micro-batches per replica, not multiples of the "
                       "pipeline size %d" % (counts, multiple))
        return multiple, ""

    def _microbatch_multiple(self, pp):
        """What Megatron's schedule needs of a replica's count: the interleaved one multiples of the pipeline
        size, the one without interleaving nothing (1)."""
        vpp = getattr(self._get_args(), "virtual_pipeline_model_parallel_size", None)
        return pp if vpp is not None and vpp > 1 and pp > 1 else 1

    def _accept(self, counts):
        """Megatron's own constraints on a replica's count."""
        args = self._get_args()
        vpp = getattr(args, "virtual_pipeline_model_parallel_size", None)
        pp = self._mpu.get_pipeline_model_parallel_world_size()
        if vpp is not None and vpp > 1 and pp > 1:
            odd = [n for n in counts if n % pp != 0]
            if odd:
                return ("the interleaved pipeline schedule needs each replica's micro-batches to be a multiple of "
                        "the pipeline size %d, not %s" % (pp, odd))
        return ""

    # --- the hooked functions -----------------------------------------------------------------------------
    def build_train_valid_test_data_loaders(self, *args, **kwargs):
        train, valid, test = self._orig_build_loaders(*args, **kwargs)
        if train is not None:
            train = self._replace_sampler(train)
        return train, valid, test

    def _replace_sampler(self, loader):
        import torch
        schedule = self._ensure_schedule()
        sampler = getattr(loader, "batch_sampler", None)
        if not isinstance(loader, torch.utils.data.DataLoader) or type(sampler) is not self._sampler_cls:
            self._refuse("the training data loader is not Megatron's single-pass loader (--dataloader-type single)")
            return loader
        if "S2" in self.refused:
            return loader
        try:
            mine = ReplicaBatchSampler(sampler.total_samples, sampler.consumed_samples, sampler.micro_batch_size,
                                       sampler.data_parallel_rank, self._mpu.get_data_parallel_world_size(),
                                       schedule, drop_last=sampler.drop_last)
        except ValueError as e:  # e.g. resumed mid-way through a global batch of another size
            self._refuse("the training sampler cannot be replaced: %s" % e)
            return loader
        return torch.utils.data.DataLoader(loader.dataset, batch_sampler=mine, num_workers=loader.num_workers,
                                           pin_memory=loader.pin_memory,
                                           persistent_workers=loader.persistent_workers,
                                           worker_init_fn=loader.worker_init_fn, collate_fn=loader.collate_fn)

    def train_step(self, forward_step_func, *args, **kwargs):
        if self.follower is None and self._schedule_index is not None:
            self._check_schedule(self._schedule_arg(args, kwargs))
        self._ensure_follower()
        margs = self._get_args()
        global_batch = margs.micro_batch_size * self.schedule.global_microbatches
        iteration = margs.consumed_train_samples // global_batch
        self.follower.poll(iteration)
        restart = self.follower.restart_strategy
        if restart and restart in self.refused:
            self.follower.decline_restart(iteration, self.refused[restart])
        elif restart and self._step_result_len is not None:
            # S3 / S4: this step does not run; Megatron's loop checkpoints (should_checkpoint), then exits with
            # the code (should_exit), as for its own checkpoint-and-exit. The restart is asked for first: a job
            # whose request did not get through goes on training instead of stopping for nothing.
            t0 = time.monotonic()
            if self.follower.request_restart(iteration):
                self._saving_for_restart = t0
                self._restart_saved = False
                return ({}, True, True, True, self._restart_exit_code) + (None,) * (self._step_result_len - 5)
        count = self.follower.num_microbatches()
        if "S2" not in self.refused and count != self._calc_mod.get_num_microbatches():
            args, kwargs = self._with_replica_schedule(args, kwargs, count)
        scale = self.follower.loss_scale()
        if scale != 1.0:
            per_token = bool(getattr(margs, "calculate_per_token_loss", False))
            inner = forward_step_func

            def forward_step_func(*a, **k):  # noqa: F811 (the job's, with the loss scaled)
                output, loss_func = inner(*a, **k)
                return output, functools.partial(_scaled_loss, loss_func, scale, per_token)

        result = self._orig_train_step(forward_step_func, *args, **kwargs)
        if self._step_result_len is None and isinstance(result, tuple):
            if len(result) >= 5:
                self._step_result_len = len(result)
            else:
                for c in self._restarts:
                    self._refuse("this Megatron's train_step returns no checkpoint-and-exit flags", c)
                    self.follower.withdraw_capability(c)
        return result

    def _schedule_arg(self, args, kwargs):
        if "forward_backward_func" in kwargs:
            return kwargs["forward_backward_func"]
        return args[self._schedule_index] if len(args) > self._schedule_index else None

    def _with_replica_schedule(self, args, kwargs, count):
        """train_step's arguments with its forward_backward_func running `count` micro-batches."""
        if "forward_backward_func" in kwargs:
            kwargs = dict(kwargs, forward_backward_func=_ReplicaSchedule(kwargs["forward_backward_func"], count))
        elif len(args) > self._schedule_index:
            i = self._schedule_index
            args = args[:i] + (_ReplicaSchedule(args[i], count),) + args[i + 1:]
        else:  # not passed: train_step's own default, which a plan must not run with another count
            raise RuntimeError("greyhound_megatron: train_step was called without its forward_backward_func while "
                               "a split is in force")
        return args, kwargs

    def save_checkpoint_and_time(self, *args, **kwargs):
        out = self._orig_save(*args, **kwargs)
        if self._saving_for_restart is not None and not self._restart_saved:
            self._restart_saved = True
            if not getattr(self._get_args(), "async_save", False):
                self._restart_durable()
            # else: Megatron writes it in the background; maybe_finalize_async_save(blocking=True), on the
            # way out of its loop, returns once it is durable.
        return out

    def maybe_finalize_async_save(self, *args, **kwargs):
        out = self._orig_finalize(*args, **kwargs)
        blocking = kwargs.get("blocking", args[0] if args else False)
        if blocking and self._restart_saved and self._saving_for_restart is not None:
            self._restart_durable()
        return out

    def _restart_durable(self):
        took = time.monotonic() - self._saving_for_restart
        self._saving_for_restart = None
        strategy = self.follower.restart_strategy
        self.follower.restart_checkpointed(apply_s=took)
        log.warning("greyhound_megatron: checkpoint for the %s restart written in %.1f s; exiting with %d",
                    strategy, took, self._restart_exit_code)


def _graphs_capture_count(args, pp):
    """Why this job's CUDA graphs fix the micro-batch count ("" where they do not), from the arguments the
    supported Megatron-LM versions use: full-iteration graphs (main: --cuda-graph-impl full_iteration;
    core_r0.17 and before: --cuda-graph-impl local with --cuda-graph-scope full_iteration) replay the captured
    iteration; local graphs record a runner per micro-batch of the captured iterations
    (megatron/core/transformer/cuda_graphs.py, CudaGraphManager); transformer-engine graphs capture
    get_num_microbatches() micro-batches with pipeline parallelism or expert-parallel overlap (cuda_graphs.py,
    TECudaGraphHelper), one otherwise."""
    impl = str(getattr(args, "cuda_graph_impl", None) or "none")
    scopes = []
    for name in ("cuda_graph_scope", "cuda_graph_modules"):
        value = getattr(args, name, None) or []
        for s in (value if isinstance(value, (list, tuple)) else [value]):
            scopes.append(str(getattr(s, "name", s)))  # an enum member (CudaGraphScope.full_iteration) or a string
    if impl == "full_iteration" or (impl == "local" and "full_iteration" in scopes):
        return "full-iteration CUDA graphs replay the captured micro-batch count"
    if impl == "local":
        return "local CUDA graphs record a runner per micro-batch of the captured iterations"
    if impl == "transformer_engine" and (pp > 1 or getattr(args, "overlap_moe_expert_parallel_comm", False)):
        return ("transformer-engine CUDA graphs with pipeline parallelism capture get_num_microbatches() "
                "micro-batches")
    return ""


def _device_from_rank():
    """Whether the installed Megatron-LM picks each process's GPU from its global rank (older releases:
    `device = args.rank % device_count`, asserting that LOCAL_RANK agrees) rather than from LOCAL_RANK: under
    such a Megatron a process placed as another rank would take another GPU, or stop at the assertion."""
    try:
        import inspect
        init = importlib.import_module("megatron.training.initialize")
        return "rank % device_count" in inspect.getsource(init._initialize_distributed)
    except Exception:  # not there to read (a stand-in, a compiled install): nothing known against it
        return False


def install(job=None, capabilities=("S2",), redis_url=None, *, gpus_per_node=0, poll_every=1,
            restart_exit_code=3):
    """Hooks Megatron-LM so that its job follows greyhound's plans. Call it once per process, before
    pretrain() (or, in a loop of your own, before the data loaders are built and the first train_step).
    job: None: GREYHOUND_JOB; redis_url: None: GREYHOUND_REDIS; capabilities: any of "S2", "S3", "S4" (S4 needs
    --save: the job checkpoints and exits with restart_exit_code for its launcher to restart it without what
    the plan excludes; S3 the same, restarted with the plan's placement, which needs place_rank() at every
    process's start and gpus_per_node); gpus_per_node: published in the layout (0: unknown); poll_every:
    PlanFollower's.
    Raises MegatronMissing when the installed Megatron lacks what it needs, ValueError for a capability this
    plugin cannot apply or an unusable Redis URL, OSError when libgreyhound_job cannot be loaded."""
    global _INSTALLED
    if _INSTALLED is not None:
        raise RuntimeError("greyhound_megatron.megatron.install() was called already in this process")
    for c in capabilities:
        if c not in ("S2", "S3", "S4"):
            raise ValueError("greyhound_megatron.megatron: capability %r is not one of S2, S3, S4" % c)
    if not isinstance(restart_exit_code, int) or not 1 <= restart_exit_code <= 255:
        raise ValueError("greyhound_megatron.megatron: restart_exit_code must be within 1..255, not %r" %
                         (restart_exit_code,))
    if not isinstance(poll_every, int) or poll_every < 1:
        raise ValueError("greyhound_megatron.megatron: poll_every must be an integer >= 1, not %r" % (poll_every,))
    mods = _import_megatron()
    from . import _capi  # the library and the Redis URL fail here, before training starts, not at its first step
    _capi.JobClient(job, redis_url, _capi.load()).close()
    needs_save = [c for c in capabilities if c in _BY_RESTART]
    if needs_save and not hasattr(mods["megatron.training.training"], "save_checkpoint_and_time"):
        raise MegatronMissing("greyhound_megatron.megatron: the installed Megatron-LM's megatron.training.training "
                              "has no save_checkpoint_and_time: %s needs it" % " and ".join(needs_save))
    _INSTALLED = MegatronAdapter(mods, job, capabilities, redis_url, gpus_per_node, poll_every, restart_exit_code)
    return _INSTALLED


def uninstall():
    """Undoes install() (for tests and in-process restarts)."""
    global _INSTALLED
    if _INSTALLED is not None:
        _INSTALLED.uninstall()
        _INSTALLED = None
