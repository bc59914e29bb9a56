"""Stand-in megatron.training: the global args."""
_ARGS = None


def set_args(args):
    global _ARGS
    _ARGS = args


def get_args():
    return _ARGS
