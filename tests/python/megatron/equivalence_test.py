"""Uneven micro-batches give the uniform split's optimiser steps, in a Megatron-shaped loop on 4 processes.

usage: /usr/bin/python3 equivalence_test.py
DP 4 over gloo (CPU); each iteration every replica reads its micro-batches of the global batch through
ReplicaBatchSampler (torch DataLoader), divides each micro-batch loss by its own count as Megatron's
schedule does, and the gradients are averaged over DP as DDP does, then SGD with momentum steps. From
iteration 2 on the allocation is [3, 1, 2, 2] instead of [2, 2, 2, 2]: with loss_scale() the parameters
after 6 steps equal the uniform run's to float64 rounding; without it they differ measurably.
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from greyhound_megatron import Allocation, AllocationSchedule, ReplicaBatchSampler  # noqa: E402

DP, MBS, STEPS, SWITCH_AT = 4, 2, 6, 2
UNIFORM, UNEVEN = [2, 2, 2, 2], [3, 1, 2, 2]


def make_data():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(STEPS * MBS * sum(UNIFORM), 8, generator=g, dtype=torch.float64)
    y = torch.sin(x.sum(dim=1, keepdim=True)) + 0.1 * torch.randn(x.shape[0], 1, generator=g, dtype=torch.float64)
    return torch.utils.data.TensorDataset(x, y)


def train(rank, init_file, plan, scale_loss, out):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=DP)
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    schedule = AllocationSchedule(Allocation(UNIFORM))
    schedule.add(SWITCH_AT, Allocation(plan))
    sampler = ReplicaBatchSampler(STEPS * MBS * sum(UNIFORM), 0, MBS, rank, DP, schedule)
    data = iter(torch.utils.data.DataLoader(make_data(), batch_sampler=sampler))
    for it in range(STEPS):
        alloc = schedule.at(it)
        n = alloc.num_microbatches(rank)
        opt.zero_grad()
        for _ in range(n):
            x, y = next(data)
            loss = torch.nn.functional.mse_loss(model(x), y) / n  # Megatron: per micro-batch loss / count
            if scale_loss:
                loss = loss * alloc.loss_scale(rank)
            loss.backward()
        for p in model.parameters():  # DDP: average over DP
            dist.all_reduce(p.grad)
            p.grad /= DP
        opt.step()
    if rank == 0:
        torch.save([p.detach().clone() for p in model.parameters()], out)
    dist.destroy_process_group()


def run(plan, scale_loss):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "params.pt")
        mp.spawn(train, args=(os.path.join(d, "init"), plan, scale_loss, out), nprocs=DP, join=True)
        return torch.load(out)


def max_diff(a, b):
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


class UnevenEqualsUniform(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.uniform = run(UNIFORM, True)

    def test_with_the_loss_scale_the_steps_equal_the_uniform_ones(self):
        uneven = run(UNEVEN, True)
        diff = max_diff(uneven, self.uniform)
        print("uneven with loss_scale vs uniform: max |diff| = %.3g" % diff)
        self.assertLess(diff, 1e-12)

    def test_without_the_loss_scale_they_differ(self):
        unscaled = run(UNEVEN, False)
        diff = max_diff(unscaled, self.uniform)
        print("uneven without loss_scale vs uniform: max |diff| = %.3g" % diff)
        self.assertGreater(diff, 1e-4)


if __name__ == "__main__":
    unittest.main(verbosity=2)
