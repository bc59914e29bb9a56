"""Stand-in for megatron.core.optimizer's FP32Optimizer over a torch optimizer: zero_grad(), param_groups (the
scheduler sets lr and weight_decay in them), and step() returning (update_successful, grad_norm,
num_zeros_in_grad) as MegatronOptimizer.step does."""
import torch


class FP32Optimizer:
    def __init__(self, optimizer):
        self.optimizer = optimizer

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self):
        params = [p for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]
        grad_norm = float(torch.norm(torch.stack([p.grad.norm() for p in params]))) if params else 0.0
        self.optimizer.step()
        return True, grad_norm, None
