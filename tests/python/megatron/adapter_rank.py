"""One rank of the stand-in Megatron job with greyhound_megatron.megatron installed (driven by adapter_test.py).

usage: adapter_rank.py RANK WORLD INIT_FILE JOB REDIS_URL OUT_DIR NUM_WORKERS [CAPABILITIES]
(CAPABILITIES comma-separated, default S2; checkpoints go to OUT_DIR). RANK is the launch rank: with S3 the
rank takes greyhound_megatron.place_rank()'s, as a restarted job's process does first thing.
"""
import argparse
import functools
import json
import os
import sys

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
    ds = torch.utils.data.TensorDataset(x, y)
    return ds, torch.utils.data.TensorDataset(x[:32], y[:32]), None


def loss_func(y, output):
    loss = torch.nn.functional.mse_loss(output, y)
    return loss, {"lm loss": loss.detach()}


def forward_step(data_iterator, model):
    x, y = next(data_iterator)
    return model(x), functools.partial(loss_func, y)


def main():
    rank, world, init_file, job, url, out, workers = sys.argv[1:8]
    rank, world, workers = int(rank), int(world), int(workers)
    caps = tuple(sys.argv[8].split(",")) if len(sys.argv) > 8 else ("S2",)
    launch_rank = rank
    if "S3" in caps:
        from greyhound_megatron import place_rank
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
        rank = place_rank(job, url).rank
        assert os.environ["RANK"] == str(rank) and os.environ["GREYHOUND_RANK"] == str(launch_rank)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    import megatron.training as mtraining
    from megatron.core import num_microbatches_calculator as calc
    from megatron.training import training
    from megatron.training.datasets.data_samplers import MegatronPretrainingSampler
    from greyhound_megatron.megatron import install

    mtraining.set_args(argparse.Namespace(micro_batch_size=MBS, global_batch_size=GLOBAL_BATCH,
                                          consumed_train_samples=0, num_workers=workers,
                                          calculate_per_token_loss=False, rampup_batch_size=None, save=out))
    calc.init_num_microbatches_calculator(GLOBAL_BATCH, MBS, world)
    adapter = install(job, capabilities=caps, redis_url=url, gpus_per_node=1 if "S3" in caps else 0)
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1)).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    valid = training.pretrain(provider, model, opt, forward_step, ITERS)
    if rank == 0:
        torch.save([p.detach().clone() for p in model.parameters()], os.path.join(out, "params.pt"))
    with open(os.path.join(out, "rank-%d.json" % launch_rank), "w") as f:
        json.dump({"rank": rank, "seen": training.SEEN, "consumed": mtraining.get_args().consumed_train_samples,
                   "valid_sampler_untouched": type(valid.batch_sampler) is MegatronPretrainingSampler,
                   "refused": adapter.refused}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
