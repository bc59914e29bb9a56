"""The micro-batch allocation over DP replicas, and what it means for each replica (pure; no torch, no Megatron).

An allocation gives replica d N_d micro-batches of the same global batch (sum N_d micro-batches of
micro_batch_size samples). For the optimiser step to equal the uniform split's, replica d's loss, which the
schedule divides by N_d, is multiplied by dp * N_d / sum(N) (DDP then averages over dp): the gradient is the
mean over all sum(N) micro-batches, whichever replica computed each.

Samples: the global batch is sum(N) slots of micro_batch_size consecutive samples. While the allocation is
uniform a replica takes Megatron's slots (micro-step j of replica d: slot j * dp + d), so nothing changes until
a plan does; otherwise replica d takes the slots from the prefix sum of the replicas before it. Either way the
global batch holds the same samples.
"""


class AllocationError(ValueError):
    """An allocation that is not one for this job (the reason is the message)."""


class Allocation:
    __slots__ = ("counts",)

    def __init__(self, counts):
        counts = tuple(counts)
        if not counts:
            raise AllocationError("no DP replica")
        for i, n in enumerate(counts):
            if isinstance(n, bool) or not isinstance(n, int):
                raise AllocationError("replica %d: %r is not an integer" % (i, n))
            if n < 1:
                raise AllocationError("replica %d: %d micro-batches (at least 1)" % (i, n))
        self.counts = counts

    @classmethod
    def uniform(cls, dp_size, microbatches):
        return cls([microbatches] * dp_size)

    @property
    def dp_size(self):
        return len(self.counts)

    @property
    def total(self):
        """Micro-batches in the global batch."""
        return sum(self.counts)

    @property
    def is_uniform(self):
        return all(n == self.counts[0] for n in self.counts)

    def num_microbatches(self, dp_rank):
        return self.counts[dp_rank]

    def offset(self, dp_rank):
        """Micro-batches of the replicas before dp_rank (the prefix sum)."""
        return sum(self.counts[:dp_rank])

    def loss_scale(self, dp_rank):
        """dp * N_d / sum(N): 1.0 for a uniform allocation."""
        return self.dp_size * self.counts[dp_rank] / self.total

    def slots(self, dp_rank):
        """The global batch's micro-batch slots replica dp_rank computes, in order."""
        if self.is_uniform:
            return [j * self.dp_size + dp_rank for j in range(self.counts[dp_rank])]
        start = self.offset(dp_rank)
        return list(range(start, start + self.counts[dp_rank]))

    def check_replaces(self, current):
        """Raises AllocationError unless this allocation can replace `current` (same replicas, same global
        batch)."""
        if self.dp_size != current.dp_size:
            raise AllocationError("%d entries for %d DP replicas" % (self.dp_size, current.dp_size))
        if self.total != current.total:
            raise AllocationError("%d micro-batches in the global batch, the job trains with %d" %
                                  (self.total, current.total))

    def __eq__(self, other):
        return isinstance(other, Allocation) and self.counts == other.counts

    def __hash__(self):
        return hash(self.counts)

    def __repr__(self):
        return "Allocation(%s)" % list(self.counts)


class AllocationSchedule:
    """Which allocation each global batch is computed with, keyed by the global batch's index (its first sample
    // the global batch size; Megatron's iteration for a constant global batch).

    Data loaders read ahead of training: a sampler notes each global batch it hands out (`note_generated`), and
    a new allocation is only scheduled from a global batch no sampler has started (`first_free`)."""

    def __init__(self, initial):
        self._entries = [(0, initial)]  # (from index, allocation), sorted by index
        self._initial = initial
        self.frontier = -1              # the highest index a sampler has started

    @property
    def global_microbatches(self):
        return self._initial.total

    def at(self, index):
        alloc = self._entries[0][1]
        for start, a in self._entries:
            if start > index:
                break
            alloc = a
        return alloc

    def note_generated(self, index):
        if index > self.frontier:
            self.frontier = index

    def first_free(self, index):
        """The first global batch >= index no sampler has started."""
        return max(index, self.frontier + 1)

    def add(self, from_index, allocation):
        """`allocation` from global batch `from_index` on (which no sampler may have started)."""
        if from_index <= self.frontier:
            raise AllocationError("global batch %d is already being read with the allocation in force" % from_index)
        allocation.check_replaces(self._initial)
        kept = [(s, a) for s, a in self._entries if s < from_index]
        # Entries before the one in force at the frontier are never asked for again (samplers go forward).
        while len(kept) > 1 and kept[1][0] <= self.frontier:
            kept.pop(0)
        self._entries = kept + [(from_index, allocation)]
