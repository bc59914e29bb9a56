"""Stand-in: Megatron's documented sampler behaviour (every micro_batch_size * dp consecutive samples form a
micro-step; replica d takes its d-th run of micro_batch_size) and the loader builder."""
import torch

from megatron.training import get_args


class MegatronPretrainingSampler:
    def __init__(self, total_samples, consumed_samples, micro_batch_size, data_parallel_rank, data_parallel_size,
                 drop_last=True):
        self.total_samples, self.consumed_samples = total_samples, consumed_samples
        self.micro_batch_size, self.data_parallel_rank = micro_batch_size, data_parallel_rank
        self.data_parallel_size, self.drop_last = data_parallel_size, drop_last

    def __len__(self):
        return self.total_samples

    def __iter__(self):
        step = self.micro_batch_size * self.data_parallel_size
        first = self.data_parallel_rank * self.micro_batch_size
        for start in range(self.consumed_samples, self.total_samples - step + 1, step):
            yield list(range(start + first, start + first + self.micro_batch_size))


def build_pretraining_data_loader(dataset, consumed_samples):
    import torch.distributed as dist
    args = get_args()
    sampler = MegatronPretrainingSampler(len(dataset), consumed_samples, args.micro_batch_size, dist.get_rank(),
                                         dist.get_world_size())
    return torch.utils.data.DataLoader(dataset, batch_sampler=sampler, num_workers=args.num_workers)
