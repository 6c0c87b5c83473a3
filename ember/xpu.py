"""``torch.xpu``: Intel GPUs, which ember does not drive. As torch built without XPU
support: ``is_available()`` is False, ``device_count()`` 0, and functions that need
a device raise ``AssertionError("Torch not compiled with XPU enabled")``."""
__all__ = ["is_available", "device_count", "is_initialized", "current_device",
           "set_device", "synchronize", "get_device_name", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "empty_cache", "is_bf16_supported"]


def is_available():
    """False: ember has no XPU backend."""
    return False


def device_count():
    """0: ember sees no XPU devices."""
    return 0


def is_initialized():
    """False: there is no XPU runtime to initialize."""
    return False


def is_bf16_supported(including_emulation=True):
    """False without an XPU device."""
    return False


def _not_compiled(*args, **kwargs):
    raise AssertionError("Torch not compiled with XPU enabled")


current_device = set_device = synchronize = get_device_name = _not_compiled
get_device_properties = get_device_capability = _not_compiled


def manual_seed(seed):
    """Seeding without an XPU is a no-op, deferred as in torch (never applied)."""


manual_seed_all = manual_seed


def seed():
    """No-op without an XPU (see :func:`manual_seed`)."""


seed_all = seed


def empty_cache():
    """No cached XPU memory to release."""
