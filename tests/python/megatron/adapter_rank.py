"""One rank of the stand-in Megatron job with greyhound_megatron.megatron installed (driven by adapter_test.py).

usage: adapter_rank.py RANK WORLD INIT_FILE JOB REDIS_URL OUT_DIR NUM_WORKERS [CAPABILITIES [OPTIONS_JSON]]
(CAPABILITIES comma-separated, default S2; checkpoints go to OUT_DIR). RANK is the launch rank: with S3 the
rank takes greyhound_megatron.place_rank()'s, as a restarted job's process does first thing. OPTIONS_JSON:
"loss": "token_mean" (pretrain_gpt's 3-tuple, loss divided by its tokens), "per_token"
(--calculate-per-token-loss) or "legacy" (a 2-tuple); "async_save": true; any other key is set in Megatron's
args (e.g. "step_batch_size_schedule").
The job: a float64 MLP under the stand-in's DistributedDataParallel, SGD with momentum under FP32Optimizer,
OptimizerParamScheduler warming up over 2 global batches and decaying linearly, trained through the
stand-in's train() as pretrain() would.
"""
import argparse
import functools
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "standin"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ITERS, MBS, GLOBAL_BATCH = 6, 2, 16


def provider():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(ITERS * GLOBAL_BATCH, 8, generator=g, dtype=torch.float64)
    y = torch.cos(x.sum(dim=1, keepdim=True))
    mask = (torch.arange(ITERS * GLOBAL_BATCH) % 3 != 0).to(torch.float64).view(-1, 1)  # tokens that count
    ds = torch.utils.data.TensorDataset(x, y, mask)
    return ds, torch.utils.data.TensorDataset(x[:32], y[:32], mask[:32]), None


def loss_func(kind, y, mask, output):
    """pretrain_gpt.py's loss_func shape: (sum of the masked losses, their count, report) or the legacy pair."""
    losses = (output - y) ** 2 * mask
    if kind == "legacy":
        loss = losses.sum() / mask.sum()
        return loss, {"lm loss": loss.detach().view(1)}
    loss = losses.sum()
    num_tokens = mask.sum().to(torch.int)
    return loss, num_tokens, {"lm loss": torch.cat([loss.detach().view(1), num_tokens.view(1).to(loss.dtype)])}


def forward_step(kind, data_iterator, model):
    x, y, mask = next(data_iterator)
    return model(x), functools.partial(loss_func, kind, y, mask)


def watch_async_writes(training, async_utils, job, url, path):
    """The test's probe: when a queued checkpoint write lands (inside maybe_finalize_async_save), note which
    ranks had acknowledged the plan by then (none may have: the checkpoint was not durable before)."""
    import redis
    client = redis.Redis.from_url(url, decode_responses=True)
    schedule = async_utils.schedule_async_save

    def observed(write):
        def landed():
            write()
            with open(path, "w") as f:
                json.dump({"acks_when_durable": sorted(client.hkeys("gh:v1:{%s}:plan:acks" % job))}, f)
        schedule(landed)

    training.schedule_async_save = observed  # training.py imported it by name


def main():
    rank, world, init_file, job, url, out, workers = sys.argv[1:8]
    rank, world, workers = int(rank), int(world), int(workers)
    caps = tuple(sys.argv[8].split(",")) if len(sys.argv) > 8 else ("S2",)
    options = json.loads(sys.argv[9]) if len(sys.argv) > 9 else {}
    kind = options.pop("loss", "token_mean")
    launch_rank = rank
    if "S3" in caps:
        from greyhound_megatron import place_rank
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
        rank = place_rank(job, url).rank
        assert os.environ["RANK"] == str(rank) and os.environ["GREYHOUND_RANK"] == str(launch_rank)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    import megatron.training as mtraining
    from megatron.core import num_microbatches_calculator as calc
    from megatron.core.distributed import DistributedDataParallel, finalize_model_grads
    from megatron.core.optimizer import FP32Optimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    from megatron.training import async_utils, training
    from megatron.training.datasets.data_samplers import MegatronPretrainingSampler
    from greyhound_megatron.megatron import install

    args = dict(micro_batch_size=MBS, global_batch_size=GLOBAL_BATCH, data_parallel_size=world, seq_length=1,
                consumed_train_samples=0, iteration=0, train_iters=ITERS, num_workers=workers,
                dataloader_type="single", calculate_per_token_loss=kind == "per_token", rampup_batch_size=None,
                step_batch_size_schedule=None, iterations_to_skip=[], cuda_graph_impl="none", save=out,
                async_save=bool(options.pop("async_save", False)))
    args.update(options)
    mtraining.set_args(argparse.Namespace(**args))
    calc.init_num_microbatches_calculator(rank=rank, rampup_batch_size=args["rampup_batch_size"],
                                          global_batch_size=GLOBAL_BATCH, micro_batch_size=MBS,
                                          data_parallel_size=world,
                                          step_batch_size_schedule=args["step_batch_size_schedule"])
    if args["async_save"]:
        watch_async_writes(training, async_utils, job, url, os.path.join(out, "async-rank%d.json" % rank))
    adapter = install(job, capabilities=caps, redis_url=url, gpus_per_node=1 if "S3" in caps else 0)
    torch.manual_seed(5)
    config = types.SimpleNamespace(calculate_per_token_loss=kind == "per_token",
                                   finalize_model_grads_func=finalize_model_grads)
    module = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1)).double()
    model = [DistributedDataParallel(config, module)]
    optimizer = FP32Optimizer(torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9))
    scheduler = OptimizerParamScheduler(optimizer, init_lr=0.0, max_lr=0.1, min_lr=0.01, lr_warmup_steps=2 * GLOBAL_BATCH,
                                        lr_decay_steps=ITERS * GLOBAL_BATCH, lr_decay_style="linear", start_wd=0.0,
                                        end_wd=0.0, wd_incr_steps=1, wd_incr_style="constant")
    valid = training.pretrain(provider, model, optimizer, scheduler, functools.partial(forward_step, kind), config)
    if rank == 0:
        torch.save([p.detach().clone() for p in module.parameters()], os.path.join(out, "params.pt"))
    with open(os.path.join(out, "rank-%d.json" % launch_rank), "w") as f:
        json.dump({"rank": rank, "seen": training.SEEN, "consumed": mtraining.get_args().consumed_train_samples,
                   "valid_samplers_untouched": [type(v.batch_sampler) is MegatronPretrainingSampler for v in valid],
                   "saves": training.SAVES, "finalized": async_utils.FINALIZED, "refused": adapter.refused}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
