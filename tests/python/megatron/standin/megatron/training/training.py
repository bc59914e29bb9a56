"""Stand-in for megatron/training/training.py (Megatron-LM main, megatron-core 0.20): the names the adapter
hooks and the loop around them, from the facts of the real module (no Megatron code):
  - module globals are looked up at call time; get_num_microbatches, update_num_microbatches and
    maybe_finalize_async_save are imported by name;
  - train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config,
    forward_backward_func, iteration=None): zero the grad buffers, forward_backward_func(...) by keyword with
    num_microbatches=get_num_microbatches(), optimizer.step(), then opt_param_scheduler.step(increment=
    get_num_microbatches() * micro_batch_size * data_parallel_size); the loss dict averages the schedule's
    reports (2-element [sum, tokens] reports all-reduced over DP, 1-element ones averaged); an 8-tuple;
  - dummy_train_step pulls get_num_microbatches() micro-batches for an iteration in --iterations-to-skip;
  - build_train_valid_test_data_loaders builds on TP rank 0 only, validation loaders as a list;
  - train(): update_num_microbatches before each step (a checkpoint when the count grows), skipped
    iterations, train_step, save on should_checkpoint, stop on should_exit, consumed_train_samples +=
    dp * micro_batch_size * get_num_microbatches(), and maybe_finalize_async_save(blocking=True,
    terminate=True) on the way out, then sys.exit(exit_code) when should_exit.
SEEN records what the tests check at each step: the iteration, the count the schedule ran, Megatron's count
after the step, the scheduler's num_steps and the learning rate."""
import json
import sys

import torch
import torch.distributed as dist

from megatron.core import parallel_state as mpu
from megatron.core.num_microbatches_calculator import get_num_microbatches, update_num_microbatches
from megatron.core.pipeline_parallel import get_forward_backward_func
from megatron.training import get_args
from megatron.training.async_utils import maybe_finalize_async_save, schedule_async_save
from megatron.training.datasets.data_samplers import build_pretraining_data_loader

SEEN = []
SAVES = []  # (iteration, consumed_train_samples) of every checkpoint written


def build_train_valid_test_datasets(provider):
    return provider()


def build_train_valid_test_data_loaders(build_train_valid_test_datasets_provider):
    args = get_args()
    train_dataloader, valid_dataloaders, test_dataloader = None, None, None
    if mpu.get_tensor_model_parallel_rank() == 0:
        train_ds, valid_ds, test_ds = build_train_valid_test_datasets(build_train_valid_test_datasets_provider)
        valid_ds = [valid_ds] if not isinstance(valid_ds, list) else valid_ds
        train_dataloader = build_pretraining_data_loader(train_ds, args.consumed_train_samples)
        valid_dataloaders = [build_pretraining_data_loader(v, 0) for v in valid_ds]
        test_dataloader = build_pretraining_data_loader(test_ds, 0)
    return train_dataloader, valid_dataloaders, test_dataloader


def dummy_train_step(data_iterator):
    for _ in range(get_num_microbatches()):
        next(data_iterator)


def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler, config, forward_backward_func,
               iteration=None):
    args = get_args()
    for model_chunk in model:
        model_chunk.zero_grad_buffer()
    optimizer.zero_grad()
    losses_reduced = forward_backward_func(
        forward_step_func=forward_step_func, data_iterator=data_iterator, model=model,
        num_microbatches=get_num_microbatches(), seq_length=args.seq_length, micro_batch_size=args.micro_batch_size,
        decoder_seq_length=None, forward_only=False, adjust_tensor_shapes_fn=None, force_all_reduce=False)
    update_successful, grad_norm, num_zeros_in_grad = optimizer.step()
    if update_successful:
        increment = get_num_microbatches() * args.micro_batch_size * args.data_parallel_size
        opt_param_scheduler.step(increment=increment)
        skipped_iter = 0
    else:
        skipped_iter = 1
    loss_reduced = {}
    for key in losses_reduced[0].keys():
        val = [x[key].view(-1) for x in losses_reduced]
        if val[0].numel() == 2:
            val = torch.vstack(val).sum(dim=0)
            dist.all_reduce(val, group=mpu.get_data_parallel_group(with_context_parallel=True))
            loss_reduced[key] = val[0] / val[1]
        else:
            loss_reduced[key] = torch.cat(val).mean()
    loss_reduced["ran"] = len(losses_reduced)  # (the stand-in's: how many micro-batches the schedule ran)
    return loss_reduced, skipped_iter, False, False, 0, grad_norm, num_zeros_in_grad, 0


def save_checkpoint_and_time(iteration, model, optimizer, opt_param_scheduler, num_floating_point_operations_so_far,
                             checkpointing_context, non_persistent_ckpt=False, train_data_iterator=None):
    args = get_args()
    record = {"iteration": iteration, "consumed_train_samples": args.consumed_train_samples,
              "num_steps": opt_param_scheduler.num_steps}
    path = "%s/checkpoint-rank%d.json" % (args.save, dist.get_rank())

    def write():
        with open(path, "w") as f:
            json.dump(record, f)
        SAVES.append((iteration, record["consumed_train_samples"]))

    if args.async_save:
        schedule_async_save(write)
    else:
        write()


def train(forward_step_func, model, optimizer, opt_param_scheduler, train_data_iterator, config):
    args = get_args()
    forward_backward_func = get_forward_backward_func()
    iteration = args.iteration
    num_microbatches = get_num_microbatches()
    should_exit, exit_code = False, 0
    while iteration < args.train_iters:
        update_num_microbatches(args.consumed_train_samples, consistency_check=False, verbose=True)
        if get_num_microbatches() != num_microbatches and iteration != 0:
            assert get_num_microbatches() > num_microbatches
            if args.save is not None:
                save_checkpoint_and_time(iteration, model, optimizer, opt_param_scheduler, 0, None,
                                         train_data_iterator=train_data_iterator)
        num_microbatches = get_num_microbatches()
        update_num_microbatches(args.consumed_train_samples, consistency_check=True, verbose=True)
        if (iteration + 1) in args.iterations_to_skip:
            dummy_train_step(train_data_iterator)
            iteration += 1
            args.consumed_train_samples += mpu.get_data_parallel_world_size() * args.micro_batch_size * \
                get_num_microbatches()
            continue
        args.curr_iteration = iteration
        (loss_dict, skipped_iter, should_checkpoint, should_exit, exit_code, grad_norm, num_zeros_in_grad,
         max_attention_logit) = train_step(forward_step_func, train_data_iterator, model, optimizer,
                                           opt_param_scheduler, config, forward_backward_func, iteration=iteration)
        if should_checkpoint:
            save_checkpoint_and_time(iteration, model, optimizer, opt_param_scheduler, 0, None,
                                     train_data_iterator=train_data_iterator)
        if should_exit:
            break
        SEEN.append((iteration, loss_dict["ran"], get_num_microbatches(), opt_param_scheduler.num_steps,
                     optimizer.param_groups[0]["lr"]))
        iteration += 1
        args.consumed_train_samples += mpu.get_data_parallel_world_size() * args.micro_batch_size * \
            get_num_microbatches()
    maybe_finalize_async_save(blocking=True, terminate=True)
    if should_exit:
        dist.barrier()
        sys.exit(exit_code)
    return iteration


def pretrain(provider, model, optimizer, opt_param_scheduler, forward_step_func, config):
    """What the tests drive: the loaders (through the module global, as pretrain's
    build_train_valid_test_data_iterators does), then train()."""
    train_loader, valid_loaders, _ = build_train_valid_test_data_loaders(provider)
    train(forward_step_func, model, optimizer, opt_param_scheduler, iter(train_loader), config)
    return valid_loaders
