"""greyhound's plans applied by a PyTorch training job (Megatron-LM style), on libgreyhound_job's C API.

The core (PlanFollower, Allocation, ReplicaBatchSampler, place_rank) imports neither Megatron nor, until a
collective is needed, torch; greyhound_megatron.megatron.install() is the Megatron adapter. docs/megatron.md
says how to enable it and what it changes.
"""
from .allocation import Allocation, AllocationError, AllocationSchedule
from .follower import PlanFollower
from .launch import Placed, place_rank, placed
from .sampler import ReplicaBatchSampler

__all__ = ["Allocation", "AllocationError", "AllocationSchedule", "Placed", "PlanFollower", "ReplicaBatchSampler",
           "place_rank", "placed"]
