"""Stand-in for megatron/training/async_utils.py: schedule_async_save queues a checkpoint write that only
maybe_finalize_async_save finishes (all of them when blocking, none otherwise: the stand-in's background
writer is never done early), and nothing when args.async_save is off. FINALIZED counts blocking calls that
finished writes, for the tests."""
from megatron.training import get_args

_QUEUE = []
FINALIZED = []


def schedule_async_save(write):
    _QUEUE.append(write)


def is_empty_async_queue():
    return not _QUEUE


def maybe_finalize_async_save(blocking=False, terminate=False):
    args = get_args()
    if not args.async_save:
        return
    if blocking:
        while _QUEUE:
            _QUEUE.pop(0)()
            FINALIZED.append(terminate)
