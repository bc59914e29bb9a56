"""Stand-in for megatron/core/optimizer_param_scheduler.py: OptimizerParamScheduler's keyword signature and its
step(increment): num_steps counts samples (train_step passes get_num_microbatches() x micro batch x DP), and
every param group's lr is set from it (linear warm-up, then linear decay to min_lr at lr_decay_steps; the real
class has more decay styles, none of which matter here) and its weight decay (constant)."""


class OptimizerParamScheduler:
    def __init__(self, optimizer, init_lr, max_lr, min_lr, lr_warmup_steps, lr_decay_steps, lr_decay_style,
                 start_wd, end_wd, wd_incr_steps, wd_incr_style, use_checkpoint_opt_param_scheduler=True,
                 override_opt_param_scheduler=False, wsd_decay_steps=None, lr_wsd_decay_style=None):
        assert lr_decay_style == "linear" and wd_incr_style == "constant", "the stand-in models these only"
        self.optimizer = optimizer
        self.init_lr, self.max_lr, self.min_lr = init_lr, float(max_lr), min_lr
        self.lr_warmup_steps, self.lr_decay_steps = lr_warmup_steps, lr_decay_steps
        self.start_wd = start_wd
        self.num_steps = 0
        self.step(0)

    def get_lr(self, param_group):
        if self.lr_warmup_steps > 0 and self.num_steps <= self.lr_warmup_steps:
            return self.init_lr + (self.max_lr - self.init_lr) * self.num_steps / self.lr_warmup_steps
        if self.num_steps > self.lr_decay_steps:
            return self.min_lr
        ratio = (self.num_steps - self.lr_warmup_steps) / (self.lr_decay_steps - self.lr_warmup_steps)
        return self.max_lr - (self.max_lr - self.min_lr) * ratio

    def get_wd(self, param_group=None):
        return self.start_wd

    def step(self, increment):
        self.num_steps += increment
        for param_group in self.optimizer.param_groups:
            param_group["lr"] = self.get_lr(param_group)
            param_group["weight_decay"] = self.get_wd(param_group) * param_group.get("wd_mult", 1.0)
