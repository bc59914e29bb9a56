"""Stand-in for megatron/core/pipeline_parallel: get_forward_backward_func, as in its __init__.py."""
from .schedules import get_forward_backward_func  # noqa: F401
