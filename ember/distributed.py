"""``torch.distributed``: ember runs in one process, with no process groups.

``is_available()`` is False and ``is_initialized()`` is False, so programs that check
first (``if dist.is_available() and dist.is_initialized()``) take their one-process
path; ``init_process_group`` and the collectives raise ``NotImplementedError``.
"""

__all__ = ["is_available", "is_initialized", "is_torchelastic_launched", "get_rank",
           "get_world_size", "init_process_group", "destroy_process_group", "barrier",
           "all_reduce", "all_gather", "broadcast", "reduce", "ReduceOp"]


def is_available():
    """False: ember has no distributed backend."""
    return False


def is_initialized():
    """False: no process group can exist in ember."""
    return False


def is_torchelastic_launched():
    return False


def _no_group():
    return ValueError("Default process group has not been initialized, please make sure to "
                      "call init_process_group.")


def get_rank(group=None):
    raise _no_group()


def get_world_size(group=None):
    raise _no_group()


def _not_implemented(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"torch.distributed.{name} is not implemented in ember "
                                  "(one process, no process groups)")
    fn.__name__ = name
    fn.__doc__ = f"``torch.distributed.{name}``: not implemented in ember."
    return fn


init_process_group = _not_implemented("init_process_group")
destroy_process_group = _not_implemented("destroy_process_group")
barrier = _not_implemented("barrier")
all_reduce = _not_implemented("all_reduce")
all_gather = _not_implemented("all_gather")
broadcast = _not_implemented("broadcast")
reduce = _not_implemented("reduce")


class ReduceOp:
    """The names of PyTorch's reduction operators (the collectives are not implemented)."""
    SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, AVG, PREMUL_SUM = (
        "sum", "product", "min", "max", "band", "bor", "bxor", "avg", "premul_sum")


def __getattr__(name):
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
