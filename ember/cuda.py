"""``ember.cuda``: the GPU device, backed by CuPy (``torch.cuda``'s everyday functions).

Without CuPy or without a GPU, ``is_available()`` is False and ``device_count()`` is
0; seeding is then a no-op (as in PyTorch, where it is deferred until CUDA starts);
functions that need a GPU raise a RuntimeError saying what is missing.
"""
from ember import backend

__all__ = ["is_available", "device_count", "current_device", "set_device", "get_device_name",
           "synchronize", "empty_cache", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "is_initialized", "get_rng_state_all", "set_rng_state_all", "CUDAGraph",
           "StreamContext", "stream", "graph",
           "Stream", "Event"]

_current = [0]


def is_available():
    """True if CuPy is installed and sees at least one GPU."""
    return backend.cuda_available()


def device_count():
    """Number of GPUs CuPy sees; 0 without CuPy or a GPU."""
    return backend.cuda_device_count()


def is_initialized():
    """True once the GPU backend has been loaded."""
    return backend._cupy[0] is not None


def _cupy():
    return backend.module_for(backend.device("cuda"))  # raises the CuPy/GPU-missing error


def _index(device):
    if device is None:
        return _current[0]
    if isinstance(device, int):
        return device
    d = backend.as_device(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return d.index or 0


def current_device():
    """Index of the selected GPU."""
    _cupy()
    return _current[0]


def set_device(device):
    """Select the GPU that ``cuda`` (without an index) means."""
    cp = _cupy()
    idx = _index(device)
    cp.cuda.Device(idx).use()
    _current[0] = idx


def get_device_name(device=None):
    """The GPU's name, e.g. ``'NVIDIA H100'``."""
    cp = _cupy()
    props = cp.cuda.runtime.getDeviceProperties(_index(device))
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else name


def synchronize(device=None):
    """Wait for all work queued on the GPU to finish."""
    cp = _cupy()
    with cp.cuda.Device(_index(device)):
        cp.cuda.Stream.null.synchronize()


def empty_cache():
    """Return the cached, unused GPU memory of CuPy's pool to the driver."""
    if is_initialized():
        backend._cupy[0].get_default_memory_pool().free_all_blocks()


def manual_seed(seed):
    """Seed the GPU random generator (a no-op without a GPU, as in PyTorch)."""
    seed = int(seed)
    if is_available():
        backend._cupy[0].random.seed(seed % (2 ** 32))


manual_seed_all = manual_seed


def seed():
    """Seed the GPU random generator non-deterministically (no-op without a GPU)."""
    if is_available():
        backend._cupy[0].random.seed()


seed_all = seed


def get_rng_state_all():
    """The random generator state of every GPU: [] without a GPU; CuPy's generator
    state cannot be read back, so with a GPU this raises."""
    if device_count() == 0:
        return []
    raise NotImplementedError("torch.cuda.get_rng_state_all: CuPy's random generator "
                              "state cannot be read back (seed with manual_seed_all)")


def set_rng_state_all(new_states):
    """Set every GPU's random generator state. Without a GPU this is deferred and never
    applied, as in PyTorch (like seeding); with a GPU it raises (see
    :func:`get_rng_state_all`)."""
    if device_count() == 0:
        return
    raise NotImplementedError("torch.cuda.set_rng_state_all: CuPy's random generator "
                              "state cannot be set (seed with manual_seed_all)")


class Stream:
    """``torch.cuda.Stream``: ember queues no work on CUDA streams (CuPy's default
    stream runs everything); making one raises, as in PyTorch without CUDA."""

    def __init__(self, device=None, priority=0, **kwargs):
        if not is_available():
            raise RuntimeError("torch.cuda.Stream requires CUDA support")
        raise NotImplementedError("torch.cuda.Stream: ember runs CUDA work on CuPy's "
                                  "default stream only")


class Event:
    """``torch.cuda.Event``: not in ember; making one raises, as in PyTorch without
    CUDA."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if not is_available():
            raise RuntimeError("Tried to instantiate dummy base class Event")
        raise NotImplementedError("torch.cuda.Event is not implemented in ember")


class CUDAGraph:
    """``torch.cuda.CUDAGraph``: recording CUDA graphs is not in ember. Without CUDA,
    making one raises as in PyTorch built without CUDA."""

    def __init__(self, keep_graph=False):
        if not is_available():
            raise RuntimeError("Tried to instantiate dummy base class CUDAGraph")
        raise NotImplementedError("torch.cuda.CUDAGraph: ember does not record CUDA graphs")



class StreamContext:
    """``torch.cuda.StreamContext``: selects ``stream`` inside the ``with``. ``None`` (and,
    as in PyTorch, any stream while no GPU is present) selects nothing; since ember has
    no stream objects (:class:`Stream` raises), there is never one to select."""

    def __init__(self, stream):
        if stream is not None and is_available():
            raise NotImplementedError("torch.cuda.StreamContext: ember runs CUDA work on "
                                      "CuPy's default stream only")
        self.stream = stream
        self.idx = -1 if not is_available() else 0

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def stream(stream):
    """``torch.cuda.stream``: a :class:`StreamContext` for ``stream``."""
    return StreamContext(stream)


class graph:
    """``torch.cuda.graph``: capturing CUDA work into a :class:`CUDAGraph`. It makes its
    own side stream, so without CUDA it raises as PyTorch's CPU build does; with CUDA,
    ember does not record graphs."""

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global",
                 **kwargs):
        if not is_available():
            raise RuntimeError("torch.cuda.Stream requires CUDA support")
        raise NotImplementedError("torch.cuda.graph: ember does not record CUDA graphs")


# torch.cuda.FloatTensor and the other legacy type names
from ember._legacy import cuda_legacy_types as _legacy_types  # noqa: E402
from ember.amp import cuda_amp as amp  # noqa: E402,F401  (torch.cuda.amp)

globals().update(_legacy_types)
__all__ += list(_legacy_types)
