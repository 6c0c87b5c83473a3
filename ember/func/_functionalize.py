"""``torch.func.functionalize`` and ``torch.func.replace_all_batch_norm_modules_``."""
import functools

__all__ = ["functionalize", "replace_all_batch_norm_modules_"]


def functionalize(func, *, remove="mutations"):
    """``func`` with its in-place ops rewritten as out-of-place ones (torch's purpose:
    graphs for compilers without mutation). The outputs, and the mutations of the inputs,
    which torch copies back at the end, are those of ``func``; ember runs ``func``
    eagerly, which gives exactly them."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument "
                           f"for remove={remove}. Valid options are:\n     remove='mutations': "
                           "all inplace and out= operators will be removed from the program, "
                           "and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all "
                           "aliasing operators {view} will be replaced with their "
                           "non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper


def replace_all_batch_norm_modules_(root):
    """Make every BatchNorm in ``root`` use batch statistics only (no running stats), so
    that it can run under vmap; returns ``root``."""
    from ember.nn.modules.normalization import _BatchNorm
    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
