"""``torch.accelerator``: which accelerator is present (cuda through CuPy, or none)."""
from ember import backend

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "set_device_index", "synchronize"]


def is_available():
    """True if a GPU can be used (CuPy installed and a GPU present)."""
    return backend.cuda_available()


def current_accelerator(check_available=False):
    """``device('cuda')`` when a GPU is usable, else None."""
    return backend.device("cuda") if is_available() else None


def device_count():
    """Number of GPUs (0 without one)."""
    return backend.cuda_device_count()


def current_device_index():
    """Index of the current GPU (0), or -1 without one."""
    return 0 if is_available() else -1


def set_device_index(device):
    """Select the GPU to use (only index 0 is meaningful without several GPUs)."""
    from ember import cuda
    cuda.set_device(device)


def synchronize(device=None):
    """Wait for queued GPU work; a no-op on the cpu."""
    if is_available():
        from ember import cuda
        cuda.synchronize()
