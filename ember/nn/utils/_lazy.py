"""The guard that keeps a lazy module's uninitialized parameters out of ``nn.utils``."""
from ember.nn.parameter import is_lazy


def refuse_uninitialized(tensors, where, error=ValueError):
    """Raise ``error`` naming ``where`` if one of ``tensors`` is an uninitialized
    parameter or buffer of a lazy module.

    ember's hold no elements until the module's first forward, so without this check
    the utility would run on an empty tensor and leave the module broken, where PyTorch
    refuses (with ``error``, the type PyTorch raises at that place)."""
    for t in tensors:
        if is_lazy(t):
            raise error(f"{where}: got an uninitialized parameter or buffer of a lazy module. "
                        "Run a forward pass (a dummy input will do) to initialize it first.")
