"""``torch.nn.utils.skip_init``: build a module without initializing its parameters."""
import inspect

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` with uninitialized parameters and buffers; the
    random number stream is left as it was (torch builds on the meta device, drawing
    nothing; ember builds normally inside ``fork_rng`` and then empties the storage)."""
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    import ember.random
    device = kwargs.pop("device", "cpu")
    with ember.random.fork_rng():
        module = module_cls(*args, device=device, **kwargs)
    return module.to_empty(device=device)
