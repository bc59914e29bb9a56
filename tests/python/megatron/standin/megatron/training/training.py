"""Stand-in megatron.training.training: the names the adapter hooks, called the way Megatron's loop calls them
(module globals looked up at call time; get_num_microbatches() imported by name)."""
import json
import sys

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
    # Megatron's tuple: loss_dict, skipped_iter, should_checkpoint, should_exit, exit_code, grad_norm,
    # num_zeros_in_grad, max_attention_logit.
    return {"count": num_microbatches}, False, False, False, 0, 0.0, 0, 0


def save_checkpoint_and_time(iteration, model, optimizer, opt_param_scheduler, num_floating_point_operations_so_far,
                             checkpointing_context, train_data_iterator=None):
    args = get_args()
    with open("%s/checkpoint-rank%d.json" % (args.save, dist.get_rank()), "w") as f:
        json.dump({"iteration": iteration, "consumed_train_samples": args.consumed_train_samples}, f)


def pretrain(provider, model, optimizer, forward_step_func, train_iters):
    """Megatron's loop as far as the adapter is concerned: `iteration` counts the steps done; a step's flags
    checkpoint the job and stop it (sys.exit with the step's exit code)."""
    args = get_args()
    train_loader, valid_loader, _ = build_train_valid_test_data_loaders(provider)
    data = iter(train_loader)
    iteration = 0
    should_exit, exit_code = False, 0
    while iteration < train_iters:
        loss_dict, skipped, should_checkpoint, should_exit, exit_code = train_step(
            forward_step_func, data, model, optimizer, None, None, iteration=iteration)[:5]
        if should_checkpoint:
            save_checkpoint_and_time(iteration, model, optimizer, None, 0, None, train_data_iterator=data)
        if should_exit:
            break
        SEEN.append((iteration, loss_dict["count"], get_num_microbatches()))
        iteration += 1
        args.consumed_train_samples += dist.get_world_size() * args.micro_batch_size * get_num_microbatches()
    if should_exit:
        dist.barrier()
        sys.exit(exit_code)
    return valid_loader
