"""Stand-in for megatron/training/datasets/data_samplers.py: MegatronPretrainingSampler (its attributes, its
order: every micro_batch_size x DP consecutive samples form a micro-step, replica d takes its d-th run of
micro_batch_size, a partial last step dropped) and build_pretraining_data_loader (None for no dataset,
--dataloader-type single or cyclic, the loader's settings). Written from the real module; no Megatron code."""
import torch

from megatron.core import parallel_state as mpu
from megatron.training import get_args


class MegatronPretrainingSampler:
    def __init__(self, total_samples, consumed_samples, micro_batch_size, data_parallel_rank, data_parallel_size,
                 drop_last=True):
        self.total_samples = total_samples
        self.consumed_samples = consumed_samples
        self.micro_batch_size = micro_batch_size
        self.data_parallel_rank = data_parallel_rank
        self.micro_batch_times_data_parallel_size = micro_batch_size * data_parallel_size
        self.drop_last = drop_last
        assert self.total_samples > 0 and self.consumed_samples < self.total_samples

    def __len__(self):
        return self.total_samples

    def __iter__(self):
        batch = []
        start = self.data_parallel_rank * self.micro_batch_size
        for idx in range(self.consumed_samples, self.total_samples):
            batch.append(idx)
            if len(batch) == self.micro_batch_times_data_parallel_size:
                yield batch[start:start + self.micro_batch_size]
                batch = []
        if batch and not self.drop_last:
            yield batch[start:start + self.micro_batch_size]


class MegatronPretrainingRandomSampler(MegatronPretrainingSampler):
    """--dataloader-type cyclic (the stand-in keeps the order; the adapter only needs to tell it apart)."""


def build_pretraining_data_loader(dataset, consumed_samples):
    if dataset is None or len(dataset) == 0:
        return None
    args = get_args()
    kinds = {"single": MegatronPretrainingSampler, "cyclic": MegatronPretrainingRandomSampler}
    if args.dataloader_type not in kinds:
        raise Exception("{} dataloader type is not supported.".format(args.dataloader_type))
    sampler = kinds[args.dataloader_type](len(dataset), consumed_samples, args.micro_batch_size,
                                          mpu.get_data_parallel_rank(), mpu.get_data_parallel_world_size())
    return torch.utils.data.DataLoader(dataset, batch_sampler=sampler, num_workers=args.num_workers,
                                       persistent_workers=args.num_workers > 0)
