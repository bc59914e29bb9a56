"""One rank of a DP job run on Megatron-LM's own code with greyhound_megatron.megatron installed (driven by
conformance_test.py).

usage: conformance_rank.py SRC RANK WORLD INIT_FILE JOB REDIS_URL OUT_DIR OPTIONS_JSON
OPTIONS_JSON: "plan": the S2 counts rank 0 writes to Redis after iteration "plan_at" - 1 (the test playing the
master; none: a uniform run), then waits half a second, so that the job client's Redis thread (it reads every
0.1 s) has it when the boundary before iteration "plan_at" polls; "loss": "token_mean" (pretrain_gpt.py's loss: the masked sum,
divided by its tokens in the schedule) or "per_token" (--calculate-per-token-loss); "args": more of Megatron's
arguments (e.g. step_batch_size_schedule; the calculator is initialised from them).

What is Megatron-LM's own (SRC): the micro-batch calculators (init_num_microbatches_calculator with its
keyword signature), build_pretraining_data_loader and MegatronPretrainingSampler, OptimizerParamScheduler, the
rerun state machine, train_step and build_train_valid_test_data_loaders (megatron/training/training.py), the
schedule forward_backward_no_pipelining with forward_step, forward_step_calc_loss and backward_step
(megatron/core/pipeline_parallel/schedules.py), and the helpers they call that run on a CPU. What is the
harness's is listed in real_megatron.STUBBED, with the reason, and written to OUT_DIR/stubbed.json.
Writes OUT_DIR/rank-RANK.json: per iteration the count the schedule ran, Megatron's count, the scheduler's
steps and learning rate; and rank 0 the parameters (params.pt).
"""
import argparse
import contextlib
import functools
import importlib.util
import json
import os
import sys
import time
import types
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import real_megatron  # noqa: E402
from real_megatron import stub  # noqa: E402

ITERS, MBS, GLOBAL_BATCH, SEQ = 8, 2, 8, 4


def unreached(name):
    def f(*a, **k):
        raise AssertionError("%s is not expected to run in this configuration" % name)
    stub(name, "read by a branch this configuration does not take (it raises if called)")
    return f


class Holder:
    args = None


def get_args():
    return Holder.args


def parallel_state(groups):
    """megatron.core.parallel_state as the taken code calls it: DP over the gloo world, TP = PP = CP = 1."""
    stub("megatron.core.parallel_state", "initialize_model_parallel needs NCCL and CUDA: DP over the gloo world, "
                                         "TP = PP = CP = 1, single-rank groups for the rest")
    ps = types.ModuleType("megatron.core.parallel_state")
    ps.get_data_parallel_rank = lambda with_context_parallel=False, partial_data_parallel=False: dist.get_rank()
    ps.get_data_parallel_world_size = lambda with_context_parallel=False, partial_data_parallel=False: \
        dist.get_world_size()
    ps.get_data_parallel_group = lambda with_context_parallel=False, partial_data_parallel=False: groups.dp
    ps.get_tensor_model_parallel_rank = lambda: 0
    ps.get_tensor_model_parallel_world_size = lambda: 1
    ps.get_pipeline_model_parallel_world_size = lambda: 1
    ps.get_pipeline_model_parallel_rank = lambda: 0
    ps.get_context_parallel_world_size = lambda: 1
    ps.get_model_parallel_group = lambda: groups.mp
    for name in ("get_tensor_model_parallel_group", "get_context_parallel_group", "get_pipeline_model_parallel_group"):
        setattr(ps, name, lambda: groups.mp)
    ps.get_embedding_group = ps.get_position_embedding_group = lambda check_initialized=True: groups.mp
    ps.is_pipeline_last_stage = lambda ignore_virtual=True, vp_stage=None: True
    ps.is_pipeline_first_stage = lambda ignore_virtual=True, vp_stage=None: True
    return ps


def single_rank_groups():
    """A gloo group of each rank alone (every rank creates every group, as torch.distributed requires)."""
    mine = None
    for r in range(dist.get_world_size()):
        g = dist.new_group([r], backend="gloo")
        if r == dist.get_rank():
            mine = g
    return mine


class Timers:
    def __call__(self, name, log_level=0):
        return self

    def start(self, barrier=False):
        pass

    def stop(self, barrier=False):
        pass


def load(src, groups):
    """Megatron-LM's modules and functions from SRC, with the harness's stubs; returns a namespace."""
    co = real_megatron.Checkout(src)
    ctorch = real_megatron.CpuTorch(torch)
    ps = parallel_state(groups)
    core = co.package("megatron.core")
    sys.modules["megatron.core.parallel_state"] = ps
    core.parallel_state = core.mpu = ps
    training_pkg = co.package("megatron.training")
    training_pkg.get_args = get_args
    stub("megatron.training.global_vars", "builds tokenizers, timers and writers: get_args() answers the harness's "
                                          "args, get_timers() timers that do nothing")
    rank_utils = co.module("megatron.core._rank_utils")
    # megatron.core.utils imports transformer_engine-era torch: an empty module with the few functions the taken
    # code calls, taken from it.
    utils = types.ModuleType("megatron.core.utils")
    sys.modules["megatron.core.utils"] = core.utils = utils
    utils.log_single_rank = rank_utils.log_single_rank
    co.functions("megatron/core/utils.py", ["get_attr_wrapped_model", "get_model_type", "get_model_config"],
                 utils.__dict__)
    stub("megatron.core.utils", "its module imports what needs a newer torch: get_attr_wrapped_model, "
                                "get_model_type and get_model_config taken from it, log_single_rank from "
                                "megatron.core._rank_utils")
    calc = co.module("megatron.core.num_microbatches_calculator")
    sched_mod = co.module("megatron.core.optimizer_param_scheduler")
    samplers = co.module("megatron.training.datasets.data_samplers")
    rerun = co.module("megatron.core.rerun_state_machine")
    # forward_step_calc_loss imports MTPLossAutoScaler at each call; it is used only with multi-token prediction.
    mtp = types.ModuleType("megatron.core.transformer.multi_token_prediction")
    mtp.MTPLossAutoScaler = types.SimpleNamespace(set_loss_scale=unreached("MTPLossAutoScaler.set_loss_scale"))
    co.package("megatron.core.transformer")
    sys.modules[mtp.__name__] = mtp
    stub("megatron.core.transformer.multi_token_prediction", "imported by forward_step_calc_loss; used with "
                                                              "multi-token prediction only")

    pg = types.SimpleNamespace(mp=groups.mp, pp=groups.mp, dp_cp=groups.dp, dp=groups.dp, tp=groups.mp,
                               cp=groups.mp, dp_cp_gtp_remat=None)
    stub("ProcessGroupCollection", "the model's groups: DP over the gloo world, single-rank TP, PP, CP")

    # The schedule: megatron/core/pipeline_parallel/schedules.py.
    sched = {"torch": ctorch, "contextlib": contextlib, "partial": functools.partial, "parallel_state": ps,
             "get_model_config": utils.get_model_config, "get_model_type": utils.get_model_type,
             "get_attr_wrapped_model": utils.get_attr_wrapped_model,
             "_build_default_pg_collection": lambda: pg,
             "set_current_microbatch": lambda model, microbatch_id: None,
             "Variable": torch.autograd.Variable,
             "ProcessGroupCollection": types.SimpleNamespace}
    enums = co.module("megatron.core.transformer.enums")
    if hasattr(enums, "CudaGraphScope"):  # core_r0.17: the schedule asks whether the full iteration is graphed
        sched["CudaGraphScope"] = enums.CudaGraphScope
    stub("set_current_microbatch", "tags CUDA-graphed modules with the micro-batch; no graphs here")
    for name in ["paged_stash_reset", "combined_1f1b_schedule_for_no_pipelining",
                 "hybrid_context_parallel_forward_backward", "_reset_activation_offload", "create_cudagraphs",
                 "MoEAuxLossAutoScaler", "_get_moe_loss_scale", "_get_mtp_loss_scale", "_compute_loss_scale",
                 "_get_experimental_attention_variant_loss_scale_func", "get_tensor_device", "off_interface"]:
        sched[name] = unreached(name)
    schedules_rel = "megatron/core/pipeline_parallel/schedules.py"
    names = ["forward_backward_no_pipelining", "forward_step", "forward_step_calc_loss", "backward_step",
             "check_first_val_step", "custom_backward", "deallocate_output_tensor"]
    for optional in ["_get_experimental_attention_variant_loss_scale_func", "get_tensor_device", "_compute_loss_scale",
                     "_normalize_loss_scale", "_get_moe_loss_scale", "_get_mtp_loss_scale"]:
        with open(co.path(schedules_rel)) as f:
            if ("def %s(" % optional) in f.read():
                names.append(optional)
    co.functions(schedules_rel, names, sched)
    if "custom_backward" in sched:
        sched["custom_backward"] = unreached("custom_backward")  # deallocate_pipeline_outputs is off
    real_megatron.check_globals(sched)

    # train_step and the loaders: megatron/training/training.py.
    train = {"torch": ctorch, "get_args": get_args, "get_timers": lambda: Timers(), "mpu": ps,
             "get_rerun_state_machine": rerun.get_rerun_state_machine, "get_num_microbatches": calc.get_num_microbatches,
             "has_nvidia_modelopt": False, "nullcontext": contextlib.nullcontext, "defaultdict": defaultdict,
             "FullCudaGraphWrapper": types.SimpleNamespace(cuda_graph={}),
             "DistributedOptimizer": type("DistributedOptimizer", (), {}),
             "get_attr_wrapped_model": utils.get_attr_wrapped_model, "get_moe_router_tracer": lambda: None,
             "_otel_sg_enabled": lambda name: False,
             "ProcessGroupCollection": types.SimpleNamespace(use_mpu_process_groups=lambda: pg),
             "build_pretraining_data_loader": samplers.build_pretraining_data_loader,
             "print_rank_0": lambda *a, **k: None,
             "build_train_valid_test_datasets": lambda provider, train_valid_test_num_samples=None: provider(),
             }
    stub("get_moe_router_tracer", "no MoE router tracer")
    stub("OpenTelemetry spans (_otel_sg_enabled)", "off")
    stub("build_train_valid_test_datasets", "calls the dataset provider without Megatron's sample-count "
                                            "arithmetic (get_train_valid_test_num_samples)")
    for name in ["get_tensor_shapes_adjust_fn_for_distillation", "enable_activation_logging", "save_activations",
                 "disable_activation_logging", "enable_tokens_per_expert_logging", "save_tokens_per_expert",
                 "disable_tokens_per_expert_logging", "enable_dgrad_logging", "save_dgrads", "disable_dgrad_logging",
                 "unwrap_model", "save_grads", "clip_qk", "span_cm", "get_telemetry"]:
        train[name] = unreached(name)
    utils_rel = ("megatron/training/utils/common_utils.py"
                 if os.path.isfile(co.path("megatron/training/utils/common_utils.py")) else "megatron/training/utils.py")
    co.functions(utils_rel, ["reduce_max_stat_across_model_parallel_group", "logical_and_across_model_parallel_group"],
                 train)
    if os.path.isfile(co.path("megatron/core/pipeline_parallel/utils.py")):
        with open(co.path("megatron/core/pipeline_parallel/utils.py")) as f:
            if "def is_pp_last_stage(" in f.read():
                pp_utils = {"torch": ctorch}
                co.functions("megatron/core/pipeline_parallel/utils.py", ["is_pp_last_stage"], pp_utils)
                pp_utils["get_pg_rank"] = lambda group: dist.get_rank(group)
                pp_utils["get_pg_size"] = lambda group: dist.get_world_size(group)
                stub("get_pg_rank, get_pg_size", "torch.distributed's rank and size in the group")
                train["is_pp_last_stage"] = pp_utils["is_pp_last_stage"]
    with open(co.path("megatron/training/training.py")) as f:
        text = f.read()
    taken = ["train_step", "build_train_valid_test_data_loaders"]
    if "def _forward_backward_grad_context(" in text:
        taken.append("_forward_backward_grad_context")
    training = types.ModuleType("megatron.training.training")
    training.__dict__.update(train)
    co.functions("megatron/training/training.py", taken, training.__dict__)
    real_megatron.check_globals(training.__dict__)
    sys.modules["megatron.training.training"] = training_pkg.training = training
    stub("megatron.training.training", "an empty module holding train_step, build_train_valid_test_data_loaders "
                                       "(and _forward_backward_grad_context) taken from the checkout's training.py; "
                                       "train()'s loop around train_step is the harness's (below)")
    stub("save_checkpoint_and_time", "not run: the conformance run has no restart")
    return types.SimpleNamespace(co=co, calc=calc, sched=sched, sched_mod=sched_mod, samplers=samplers,
                                 training=training, pg=pg, rerun=rerun)


def refusals(m, adapter):
    """What the adapter says of each configuration S2 must refuse, set as this checkout's arguments say it (the
    CUDA graph forms read from its training.py, its own CudaGraphScope where it has one)."""
    with open(m.co.path("megatron/training/training.py")) as f:
        training = f.read()
    cases = {"transformer-engine graphs, PP 2": ({"cuda_graph_impl": "transformer_engine"}, 2),
             "transformer-engine graphs, PP 1": ({"cuda_graph_impl": "transformer_engine"}, 1),
             "iterations to skip": ({"iterations_to_skip": [3]}, 1)}
    if 'args.cuda_graph_impl == "full_iteration"' in training:
        cases["full-iteration graphs"] = ({"cuda_graph_impl": "full_iteration"}, 1)
    if "CudaGraphScope.full_iteration in args.cuda_graph_scope" in training:
        scope = m.co.module("megatron.core.transformer.enums").CudaGraphScope
        cases["full-iteration graphs"] = ({"cuda_graph_impl": "local", "cuda_graph_scope": [scope.full_iteration]}, 1)
        cases["local graphs of attention"] = ({"cuda_graph_impl": "local", "cuda_graph_scope": [scope.attn]}, 1)
    ps = sys.modules["megatron.core.parallel_state"]
    said = {}
    for name, (overrides, pp) in cases.items():
        ps.get_pipeline_model_parallel_world_size = lambda: pp
        adapter.refused.clear()
        adapter._check_s2_config(argparse.Namespace(**dict(vars(Holder.args), **overrides)))
        said[name] = adapter.refused.get("S2", "advertised")
    adapter.refused.clear()
    ps.get_pipeline_model_parallel_world_size = lambda: 1
    return said


class Model(torch.nn.Module):
    """The model chunk as Megatron's schedule and train_step ask of it (config, model_type, set_input_tensor,
    zero_grad_buffer, force_all_reduce, pg_collection), over a float64 MLP: what
    megatron.core.distributed.DistributedDataParallel offers them."""

    def __init__(self, config, pg):
        super().__init__()
        self.module = torch.nn.Sequential(torch.nn.Linear(SEQ, 12), torch.nn.Tanh(), torch.nn.Linear(12, SEQ)).double()
        self.config, self.model_type, self.pg_collection = config, "encoder_or_decoder", pg
        self.force_all_reduce = False

    def set_input_tensor(self, tensor):
        pass

    def zero_grad_buffer(self):
        for p in self.module.parameters():
            p.grad = None

    def forward(self, x):
        return self.module(x)


def finalize_model_grads():
    """The DP gradient reduction of megatron.core.distributed, as the stand-in tree models it
    (tests/python/megatron/standin/megatron/core/distributed.py, loaded by its path: this process's megatron
    is the checkout's): the real one needs DDP's CUDA buffers."""
    stub("finalize_model_grads (DistributedDataParallel)", "DDP's CUDA grad buffers: gradients all-reduced over DP "
                                                           "by the stand-in's finalize_model_grads, scaled by 1/DP, "
                                                           "or by 1/(tokens summed over DP) with the per-token loss")
    path = os.path.join(HERE, "..", "standin", "megatron", "core", "distributed.py")
    spec = importlib.util.spec_from_file_location("greyhound_standin_distributed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.finalize_model_grads


class Optimizer:
    """MegatronOptimizer's face to train_step and the scheduler: zero_grad(), step() -> (update_successful,
    grad_norm, num_zeros_in_grad), param_groups; torch's SGD with momentum behind it."""

    def __init__(self, params):
        stub("MegatronOptimizer", "its float16/distributed optimizers need CUDA: torch's SGD behind step() -> "
                                  "(success, grad norm, None)")
        self.inner = torch.optim.SGD(params, lr=0.0, momentum=0.9)
        self.param_groups = self.inner.param_groups

    def zero_grad(self, set_to_none=True):
        self.inner.zero_grad(set_to_none=set_to_none)

    def step(self):
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        norm = float(torch.norm(torch.stack([g.norm() for g in grads])))
        self.inner.step()
        return True, norm, None


def loss_func(per_token, loss_mask, output_tensor):
    """pretrain_gpt.py's loss_func: the masked sum, the token count, and the report [sum, tokens]."""
    losses = output_tensor.view(-1).float().double()
    loss_mask = loss_mask.view(-1).double()
    loss = torch.sum(losses * loss_mask)
    num_tokens = loss_mask.sum().clone().detach().to(torch.int)
    report = {"lm loss": torch.cat([loss.clone().detach().view(1), num_tokens.view(1).double()])}
    return loss, num_tokens, report


def forward_step(per_token, data_iterator, model):
    x, y, mask = next(data_iterator)
    return (model(x) - y) ** 2, functools.partial(loss_func, per_token, mask)


def provider():
    g = torch.Generator().manual_seed(3)
    n = ITERS * GLOBAL_BATCH * 4
    x = torch.randn(n, SEQ, generator=g, dtype=torch.float64)
    y = torch.sin(x.cumsum(dim=1))
    mask = (torch.rand(n, SEQ, generator=g) > 0.3).double()
    ds = torch.utils.data.TensorDataset(x, y, mask)
    return ds, torch.utils.data.TensorDataset(x[:16], y[:16], mask[:16]), None


def main():
    src, rank, world, init_file, job, url, out, options = sys.argv[1:9]
    rank, world, options = int(rank), int(world), json.loads(options)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    groups = types.SimpleNamespace(dp=dist.group.WORLD, mp=single_rank_groups())
    m = load(src, groups)
    per_token = options.get("loss") == "per_token"
    args = dict(micro_batch_size=MBS, global_batch_size=GLOBAL_BATCH, data_parallel_size=world, seq_length=SEQ,
                decoder_seq_length=None, consumed_train_samples=0, consumed_valid_samples=0, iteration=0,
                train_iters=ITERS, num_workers=0, dataloader_type="single", calculate_per_token_loss=per_token,
                rampup_batch_size=None, step_batch_size_schedule=None, iterations_to_skip=[], cuda_graph_impl="none",
                cuda_graph_scope=[], save=None, async_save=False, hybrid_context_parallel=False, full_validation=False,
                multiple_validation_sets=False, skip_train=False, perform_rl_step=False, train_samples=None,
                phase_transition_iterations=None, eval_iters=0, eval_interval=1000, start_eval_at_iter=None,
                exit_signal_handler=False, save_params_interval=None, save_activations_interval=None,
                save_tokens_per_expert_interval=None, save_wgrads_interval=None, save_dgrads_interval=None,
                reuse_grad_buf_for_mxfp8_param_ag=False, overlap_param_gather=False, modelopt_enabled=False,
                empty_unused_memory_level=0, vision_pretraining=False, barrier_with_L1_time=False, qk_clip=False,
                log_max_attention_logit=False, log_num_zeros_in_grad=False, gtp_weight_remat_size=1,
                curr_iteration=0, freeze_all_layers=False, rank=rank, world_size=world)
    args.update(options.get("args", {}))
    Holder.args = argparse.Namespace(**args)
    init = m.calc.init_num_microbatches_calculator
    init(rank=rank, rampup_batch_size=args["rampup_batch_size"], global_batch_size=GLOBAL_BATCH,
         micro_batch_size=MBS, data_parallel_size=world, decrease_batch_size_if_needed=False,
         **({"step_batch_size_schedule": args["step_batch_size_schedule"], "seq_length": None}
            if "step_batch_size_schedule" in m.calc.init_num_microbatches_calculator.__code__.co_varnames else {}))

    from greyhound_megatron.megatron import install
    adapter = install(job, capabilities=("S2",), redis_url=url)
    if options.get("refusals"):
        with open(os.path.join(out, "refusals-%d.json" % rank), "w") as f:
            json.dump(refusals(m, adapter), f)

    torch.manual_seed(5)
    config = types.SimpleNamespace(timers=None, calculate_per_token_loss=per_token, enable_autocast=False,
                                   grad_scale_func=None, deallocate_pipeline_outputs=False, no_sync_func=None,
                                   overlap_moe_expert_parallel_comm=False, hybrid_context_parallel=False,
                                   finalize_model_grads_func=finalize_model_grads(),
                                   fine_grained_activation_offloading=False, cuda_graph_impl="none",
                                   barrier_with_L1_time=False, moe_paged_stash=False)
    model = [Model(config, m.pg)]
    optimizer = Optimizer(model[0].parameters())
    scheduler = m.sched_mod.OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=0.2, min_lr=0.02, lr_warmup_steps=2 * GLOBAL_BATCH,
        lr_decay_steps=ITERS * GLOBAL_BATCH, lr_decay_style="cosine", start_wd=0.0, end_wd=0.0, wd_incr_steps=1,
        wd_incr_style="constant")

    # train(): the lines of Megatron's loop around train_step (megatron/training/training.py), the harness's.
    training = sys.modules["megatron.training.training"]
    train_loader, valid_loaders, _ = training.build_train_valid_test_data_loaders(provider)
    data = iter(train_loader)
    fbf = m.sched["forward_backward_no_pipelining"]
    a = Holder.args
    seen = []
    redis_client = None
    if rank == 0 and options.get("plan"):
        import redis
        redis_client = redis.Redis.from_url(url)
    for iteration in range(ITERS):
        m.calc.update_num_microbatches(a.consumed_train_samples, consistency_check=False, verbose=True)
        m.calc.update_num_microbatches(a.consumed_train_samples, consistency_check=True, verbose=True)
        a.curr_iteration = iteration
        ran = []

        def counting(*fa, **fk):
            ran.append(fk["num_microbatches"])
            return fbf(*fa, **fk)

        result = training.train_step(functools.partial(forward_step, per_token), data, model, optimizer, scheduler,
                                     config, counting, iteration=iteration)
        loss_dict, skipped = result[0], result[1]
        assert not skipped
        seen.append({"iteration": iteration, "ran": ran[0], "count": m.calc.get_num_microbatches(),
                     "num_steps": scheduler.num_steps, "lr": optimizer.param_groups[0]["lr"],
                     "loss": float(loss_dict["lm loss"])})
        a.consumed_train_samples += m.samplers.mpu.get_data_parallel_world_size() * a.micro_batch_size * \
            m.calc.get_num_microbatches()
        if redis_client is not None and iteration + 1 == options["plan_at"]:
            redis_client.set("gh:v1:{%s}:plan" % job, json.dumps({
                "epoch": 1, "strategy": "S2", "action": "apply", "incident": 1, "reason": "conformance",
                "microbatches": options["plan"], "placement": None, "exclude_nodes": [], "exclude_ranks": [],
                "predicted_iteration_s": 0.0, "t_unix_ms": 0}))
            time.sleep(0.5)  # the other ranks wait for rank 0's next poll meanwhile
    if rank == 0:
        torch.save([p.detach().clone() for p in model[0].parameters()], os.path.join(out, "params.pt"))
        with open(os.path.join(out, "stubbed.json"), "w") as f:
            json.dump({"checkout": m.co.describe(), "stubbed": real_megatron.STUBBED}, f, indent=1)
    with open(os.path.join(out, "rank-%d.json" % rank), "w") as f:
        json.dump({"seen": seen, "refused": adapter.refused,
                   "sampler": type(train_loader.batch_sampler).__name__,
                   "valid_samplers": [type(v.batch_sampler).__name__ for v in valid_loaders if v is not None]}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
