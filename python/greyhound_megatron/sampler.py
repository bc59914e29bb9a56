"""A batch sampler that hands each DP replica its share of every global batch under the allocation in force
(pure Python; a torch DataLoader takes it as batch_sampler, as Megatron's MegatronPretrainingSampler).

Each yield is one micro-batch: the list of micro_batch_size sample indices. Global batch k (counted from
sample 0) covers samples [k * G, (k + 1) * G), G = micro_batch_size * global micro-batches; replica d yields
its slots of it (Allocation.slots) under schedule.at(k). With a uniform allocation the order is exactly
MegatronPretrainingSampler's.
"""


class ReplicaBatchSampler:
    def __init__(self, total_samples, consumed_samples, micro_batch_size, data_parallel_rank, data_parallel_size,
                 schedule, drop_last=True):
        if total_samples <= 0:
            raise ValueError("no sample to consume: %d" % total_samples)
        if micro_batch_size <= 0:
            raise ValueError("micro_batch_size must be >= 1, not %d" % micro_batch_size)
        if not 0 <= data_parallel_rank < data_parallel_size:
            raise ValueError("data_parallel_rank %d is not within %d replicas" % (data_parallel_rank,
                                                                                data_parallel_size))
        if schedule.at(0).dp_size != data_parallel_size:
            raise ValueError("the allocation has %d replicas, the sampler %d" % (schedule.at(0).dp_size,
                                                                               data_parallel_size))
        self.total_samples = total_samples
        self.consumed_samples = consumed_samples
        self.micro_batch_size = micro_batch_size
        self.data_parallel_rank = data_parallel_rank
        self.data_parallel_size = data_parallel_size
        self.schedule = schedule
        self.drop_last = drop_last
        self.global_batch_samples = micro_batch_size * schedule.global_microbatches
        if consumed_samples % self.global_batch_samples != 0:
            raise ValueError("consumed_samples %d is not a whole number of global batches of %d samples" %
                             (consumed_samples, self.global_batch_samples))

    def __len__(self):
        return self.total_samples  # as MegatronPretrainingSampler

    def __iter__(self):
        mbs, g, d = self.micro_batch_size, self.global_batch_samples, self.data_parallel_rank
        start = self.consumed_samples
        while start + g <= self.total_samples:
            index = start // g
            alloc = self.schedule.at(index)
            self.schedule.note_generated(index)
            for slot in alloc.slots(d):
                first = start + slot * mbs
                yield list(range(first, first + mbs))
            start += g
        # What is left is less than a global batch: Megatron's micro-steps of micro_batch_size * dp samples.
        step = mbs * self.data_parallel_size
        while start < self.total_samples:
            chunk = list(range(start, min(start + step, self.total_samples)))
            if len(chunk) < step and self.drop_last:
                return
            yield chunk[d * mbs:(d + 1) * mbs]  # (empty for some replicas of a partial step without drop_last)
            start += step
