"""Stand-in for megatron/core/num_microbatches_calculator.py (Megatron-LM main, megatron-core 0.20): a
module-global calculator that get_num_microbatches() reads at call time, init_num_microbatches_calculator's
keyword signature, the constant calculator and the step batch-size schedule calculator
(StepBatchsizeNumMicroBatchesCalculator: "THRESHOLD:BATCH_SIZE ..." thresholds in samples; the count at the
highest threshold not above the consumed samples). The deprecated rampup_batch_size is accepted and ignored,
as there. Written from the real module's signatures and behaviour; no Megatron code."""
_GLOBAL_NUM_MICROBATCHES_CALCULATOR = None


class ConstantNumMicroBatchesCalculator:
    """Mirrors ConstantNumMicroBatchesCalculator: global batch // (micro batch x DP), update() does nothing."""

    def __init__(self, global_batch_size, micro_batch_size, data_parallel_size, decrease_batch_size_if_needed,
                 rank):
        assert global_batch_size % (micro_batch_size * data_parallel_size) == 0
        self.num_micro_batches = global_batch_size // (micro_batch_size * data_parallel_size)
        self.current_global_batch_size = global_batch_size
        self.current_running_global_batch_size = global_batch_size
        self.micro_batch_size = micro_batch_size

    def get(self):
        return self.num_micro_batches

    def get_current_global_batch_size(self):
        return self.current_global_batch_size

    def get_current_running_global_batch_size(self):
        return self.current_running_global_batch_size

    def update(self, consumed_samples, consistency_check, verbose=False):
        pass


class StepBatchsizeNumMicroBatchesCalculator(ConstantNumMicroBatchesCalculator):
    """Mirrors StepBatchsizeNumMicroBatchesCalculator for thresholds in samples (no seq_length, no suffixes)."""

    def __init__(self, micro_batch_size, data_parallel_size, decrease_batch_size_if_needed, rank, schedule,
                 seq_length=None):
        if decrease_batch_size_if_needed:
            raise ValueError("Step batch size schedules do not support decrease_batch_size_if_needed")
        self.micro_batch_size = micro_batch_size
        self.micro_batch_times_data_parallel_size = micro_batch_size * data_parallel_size
        self.schedule = sorted((int(t), int(b)) for t, b in (e.split(":") for e in schedule.split()))
        self.update(0, consistency_check=False)

    def update(self, consumed_samples, consistency_check, verbose=False):
        batch = [b for t, b in self.schedule if t <= consumed_samples][-1]
        self.current_global_batch_size = self.current_running_global_batch_size = batch
        self.num_micro_batches = batch // self.micro_batch_times_data_parallel_size


def init_num_microbatches_calculator(rank, rampup_batch_size=None, global_batch_size=None, micro_batch_size=None,
                                     data_parallel_size=None, decrease_batch_size_if_needed=False,
                                     step_batch_size_schedule=None, seq_length=None):
    global _GLOBAL_NUM_MICROBATCHES_CALCULATOR
    if step_batch_size_schedule is not None:
        _GLOBAL_NUM_MICROBATCHES_CALCULATOR = StepBatchsizeNumMicroBatchesCalculator(
            micro_batch_size, data_parallel_size, decrease_batch_size_if_needed, rank, step_batch_size_schedule,
            seq_length)
    else:
        _GLOBAL_NUM_MICROBATCHES_CALCULATOR = ConstantNumMicroBatchesCalculator(
            global_batch_size, micro_batch_size, data_parallel_size, decrease_batch_size_if_needed, rank)


def get_num_microbatches():
    return _GLOBAL_NUM_MICROBATCHES_CALCULATOR.get()


def get_current_global_batch_size():
    return _GLOBAL_NUM_MICROBATCHES_CALCULATOR.get_current_global_batch_size()


def get_current_running_global_batch_size():
    return _GLOBAL_NUM_MICROBATCHES_CALCULATOR.get_current_running_global_batch_size()


def update_num_microbatches(consumed_samples, consistency_check=True, verbose=False):
    _GLOBAL_NUM_MICROBATCHES_CALCULATOR.update(consumed_samples, consistency_check, verbose)
