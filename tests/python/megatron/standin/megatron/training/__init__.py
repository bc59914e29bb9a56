"""Stand-in for megatron.training: the global args (megatron/training/global_vars.py's get_args and set_args,
re-exported by the package as there)."""
_ARGS = None


def set_args(args):
    global _ARGS
    _ARGS = args


def get_args():
    return _ARGS
