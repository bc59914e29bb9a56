"""Stand-in megatron.training.training: the names the adapter hooks, called the way Megatron's loop calls them
(module globals looked up at call time; get_num_microbatches() imported by name)."""
import torch
import torch.distributed as dist

from megatron.core.num_microbatches_calculator import get_num_microbatches
from megatron.training import get_args
from megatron.training.datasets.data_samplers import build_pretraining_data_loader

SEEN = []  # (iteration, count during the step, count after it): what the test checks


def build_train_valid_test_data_loaders(provider):
    args = get_args()
    train_ds, valid_ds, test_ds = provider()
    return (build_pretraining_data_loader(train_ds, args.consumed_train_samples),
            build_pretraining_data_loader(valid_ds, 0), None)


def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config,
               forward_backward_func=None, iteration=None):
    num_microbatches = get_num_microbatches()
    optimizer.zero_grad()
    for _ in range(num_microbatches):  # the schedule: each micro-batch loss divided by the count
        output, loss_func = forward_step_func(data_iterator, model)
        loss, _reported = loss_func(output)
        (loss / num_microbatches).backward()
    for p in model.parameters():  # DDP
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    optimizer.step()
    return {"count": num_microbatches}


def pretrain(provider, model, optimizer, forward_step_func, train_iters):
    args = get_args()
    train_loader, valid_loader, _ = build_train_valid_test_data_loaders(provider)
    data = iter(train_loader)
    for iteration in range(train_iters):
        out = train_step(forward_step_func, data, model, optimizer, None, None, iteration=iteration)
        SEEN.append((iteration, out["count"], get_num_microbatches()))
        args.consumed_train_samples += dist.get_world_size() * args.micro_batch_size * get_num_microbatches()
    return valid_loader
