"""Stand-in for megatron.core.distributed: DistributedDataParallel's zero_grad_buffer and the gradient
reduction finalize_model_grads runs (megatron/core/distributed/finalize_model_grads.py): gradients summed
over the DP group, each scaled by 1 / DP size (DDP's gradient_scaling_factor) unless the loss is per token,
where the token count summed over DP divides them instead. The conformance harness runs it beside
Megatron-LM's own code (tests/python/megatron/conformance)."""
import torch
import torch.distributed as dist


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, config, module):
        super().__init__()
        self.config = config
        self.module = module
        self.force_all_reduce = False

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def zero_grad_buffer(self):
        for p in self.module.parameters():
            p.grad = None


def finalize_model_grads(model, num_tokens=None, pg_collection=None, force_all_reduce=False):
    world = dist.get_world_size()
    for chunk in model:
        for p in chunk.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            if num_tokens is None:
                p.grad /= world
            dist.all_reduce(p.grad)
    if num_tokens is not None:
        total = num_tokens.clone().to(torch.float64)
        dist.all_reduce(total)
        for chunk in model:
            for p in chunk.parameters():
                p.grad /= total
