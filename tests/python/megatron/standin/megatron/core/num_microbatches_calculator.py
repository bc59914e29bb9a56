"""Stand-in: a module-global calculator that get_num_microbatches() reads at call time."""
_GLOBAL_NUM_MICROBATCHES_CALCULATOR = None


class ConstantNumMicroBatchesCalculator:
    def __init__(self, global_batch_size, micro_batch_size, data_parallel_size):
        assert global_batch_size % (micro_batch_size * data_parallel_size) == 0
        self.num_micro_batches = global_batch_size // (micro_batch_size * data_parallel_size)
        self.current_global_batch_size = global_batch_size
        self.micro_batch_size = micro_batch_size

    def get(self):
        return self.num_micro_batches

    def get_current_global_batch_size(self):
        return self.current_global_batch_size

    def update(self, consumed_samples, consistency_check, verbose=False):
        pass


def init_num_microbatches_calculator(global_batch_size, micro_batch_size, data_parallel_size):
    global _GLOBAL_NUM_MICROBATCHES_CALCULATOR
    _GLOBAL_NUM_MICROBATCHES_CALCULATOR = ConstantNumMicroBatchesCalculator(global_batch_size, micro_batch_size,
                                                                            data_parallel_size)


def get_num_microbatches():
    return _GLOBAL_NUM_MICROBATCHES_CALCULATOR.get()
