"""Stand-in for megatron/core/parallel_state.py: pure data parallelism over torch.distributed's world (TP = PP =
CP = 1), the getters the adapter and the stand-in loop call."""
import torch.distributed as dist


def get_data_parallel_rank(with_context_parallel=False):
    return dist.get_rank()


def get_data_parallel_world_size(with_context_parallel=False):
    return dist.get_world_size()


def get_data_parallel_group(with_context_parallel=False):
    return dist.group.WORLD


def get_tensor_model_parallel_rank():
    return 0


def get_pipeline_model_parallel_world_size():
    return 1


def is_pipeline_last_stage(ignore_virtual=False, vp_stage=None):
    return True
