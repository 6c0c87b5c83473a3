"""Small top-level torch functions about the runtime rather than math: build flags,
autocast and determinism settings, warnings, DLPack and buffer interchange,
``torch.cond``/``torch.while_loop`` (run eagerly), the ``sym_*`` helpers on plain
numbers, ``torch.range``, ``torch.vander``, ``torch.segment_reduce`` and
``torch.lobpcg``.
"""
import math
import warnings

import numpy as np

from ember import _core as ember
from ember._legacy import _legacy, _threads, use_deterministic_algorithms
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.amp import GradScaler  # noqa: F401  (torch.GradScaler)
from ember.backend import dtypes as _dt
from ember.ops.composite_node import one_node
from ember.ops.conversion import memory_format
from ember.sparse import layout  # noqa: F401  (torch.layout)
from ember.storage import UntypedStorage, is_storage  # noqa: F401

__all__ = [
    "GradScaler", "layout", "legacy_contiguous_format", "BFloat16Tensor", "UntypedStorage",
    "is_storage", "has_lapack", "has_mkl", "has_openmp", "has_spectral",
    "get_autocast_dtype", "get_autocast_cpu_dtype", "set_autocast_dtype",
    "set_autocast_cpu_dtype", "is_autocast_enabled", "is_autocast_cpu_enabled",
    "set_autocast_enabled", "set_autocast_cpu_enabled", "get_deterministic_debug_mode",
    "set_deterministic_debug_mode", "is_deterministic_algorithms_warn_only_enabled",
    "set_warn_always", "is_warn_always_enabled", "set_flush_denormal", "init_num_threads",
    "get_device_module", "thread_safe_generator", "sym_float", "sym_int", "sym_max",
    "sym_min", "sym_not", "sym_sqrt", "sym_sum", "sym_ite", "cond", "while_loop",
    "from_dlpack", "to_dlpack", "frombuffer", "from_file", "range", "vander",
    "segment_reduce", "lobpcg",
]

legacy_contiguous_format = memory_format("legacy_contiguous_format")
BFloat16Tensor = _legacy("BFloat16Tensor", _dt.bfloat16)

# what ember's NumPy backend provides: LAPACK and FFTs through NumPy, no MKL/OpenMP of
# its own
has_lapack = True
has_spectral = True
has_mkl = False
has_openmp = False

# ----- autocast settings: ember has no autocast dispatch (docs/compatibility.md) -------
_AUTOCAST_DTYPES = {"cpu": _dt.bfloat16, "cuda": _dt.float16}


def get_autocast_dtype(device_type):
    """The dtype autocast would use on ``device_type`` (torch's defaults)."""
    return _AUTOCAST_DTYPES.get(str(device_type), _dt.float16)


def get_autocast_cpu_dtype():
    """``get_autocast_dtype('cpu')`` (deprecated in torch)."""
    return get_autocast_dtype("cpu")


def set_autocast_dtype(device_type, dtype):
    """Record the dtype autocast would use on ``device_type``."""
    _AUTOCAST_DTYPES[str(device_type)] = dtype


def set_autocast_cpu_dtype(dtype):
    """``set_autocast_dtype('cpu', dtype)``."""
    set_autocast_dtype("cpu", dtype)


def is_autocast_enabled(device_type=None):
    """False: ember never runs ops under autocast."""
    return False


def is_autocast_cpu_enabled():
    """False (see :func:`is_autocast_enabled`)."""
    return False


def set_autocast_enabled(device_type, enabled=None):
    """Disabling is a no-op; enabling raises, as ``torch.autocast(enabled=True)`` does in
    ember."""
    flag = device_type if enabled is None else enabled
    if flag:
        raise NotImplementedError("autocast (mixed precision dispatch) is not implemented in "
                                  "ember; see docs/compatibility.md")


def set_autocast_cpu_enabled(enabled):
    """See :func:`set_autocast_enabled`."""
    set_autocast_enabled("cpu", enabled)


# ----- determinism, warnings, threads ----------------------------------------------------
_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """0/"default": off; 1/"warn": deterministic algorithms, warn only; 2/"error"."""
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, but got {debug_mode}")
        debug_mode = _MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """0 (off), 1 (warn only) or 2 (error), from the deterministic-algorithms flag."""
    if not ember.are_deterministic_algorithms_enabled():
        return 0
    return 1 if is_deterministic_algorithms_warn_only_enabled() else 2


def is_deterministic_algorithms_warn_only_enabled():
    """True when deterministic algorithms were requested with ``warn_only=True``."""
    return bool(_threads.get("warn_only", False))


_warn_always = [False]


def set_warn_always(b):
    """Record torch's "warn every time" flag (ember's warnings use Python's filters)."""
    _warn_always[0] = bool(b)


def is_warn_always_enabled():
    return _warn_always[0]


def set_flush_denormal(mode):
    """False: NumPy offers no flush-to-zero mode, so denormals are kept."""
    return False


def init_num_threads():
    """Nothing to initialise: NumPy's BLAS manages its own threads."""


def get_device_module(device=None):
    """The module for a device type: ``ember.cuda`` or ``ember.cpu``."""
    import importlib
    name = "cpu" if device is None else getattr(device, "type", str(device)).split(":")[0]
    if name not in ("cpu", "cuda"):
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered "
                           "as 'torch.{name}'.")
    return importlib.import_module("ember." + name)


def thread_safe_generator():
    """None: ember's DataLoader workers are processes, which use the default generator."""
    return None


# ----- symbolic-shape helpers on plain numbers --------------------------------------------
def sym_float(a):
    """``float(a)``."""
    return float(a)


def sym_int(a):
    """``a`` truncated toward zero."""
    return math.trunc(a) if isinstance(a, float) else int(a)


def sym_max(a, b):
    """``max(a, b)`` (a float if either is)."""
    r = max(a, b)
    return float(r) if isinstance(a, float) or isinstance(b, float) else r


def sym_min(a, b):
    """``min(a, b)`` (a float if either is)."""
    r = min(a, b)
    return float(r) if isinstance(a, float) or isinstance(b, float) else r


def sym_not(a):
    """``not a``."""
    return not a


def sym_sqrt(a):
    """``math.sqrt(a)``."""
    return math.sqrt(a)


def sym_sum(args):
    """``sum(args)``."""
    return sum(args)


def sym_ite(b, t, f):
    """``t if b else f``."""
    return t if b else f


# ----- control flow, run eagerly ----------------------------------------------------------
def _truth(pred):
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                               f"{tuple(pred.shape)}")
        from ember._graph.capture import values_read
        values_read(pred)  # a trace keeps the branch (the iterations) taken here
        return bool(pred.item())
    return bool(pred)


def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``."""
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError("Expect operands to be a tuple of possibly nested dict/list/tuple "
                           "that only consists of tensor leaves")
    branch = true_fn if _truth(pred) else false_fn
    from ember.ops.matmul_graph import records_graph
    from ember.utils._pytree import tree_flatten, tree_unflatten
    leaves, spec = tree_flatten(list(operands))
    if isinstance(pred, Tensor) and all(isinstance(o, Tensor) for o in leaves) and \
            records_graph(*leaves):
        # PyTorch records the whole call as one node (``CondAutogradOpBackward``) over
        # pred and the operands' tensors; a Python bool runs the branch's own ops
        def run(*xs):
            return branch(*tree_unflatten(list(xs), spec))
        return _cond_function(run).apply(pred, *leaves)
    return branch(*operands)


def _cond_function(branch):
    """The autograd Function PyTorch's ``cond`` records (``CondAutogradOpBackward``),
    running ``branch``: its backward runs the branch again under grad mode and takes
    the vector-Jacobian product (with a graph when the engine records one)."""
    from ember.autograd import Function, grad
    from ember.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad

    class CondAutogradOp(Function):
        @staticmethod
        def forward(ctx, pred, *operands):
            ctx.save_for_backward(*operands)
            with no_grad():
                return branch(*operands)

        @staticmethod
        def backward(ctx, *grads):
            ops = ctx.saved_tensors
            create = is_grad_enabled()
            xs = [o.view_as(o) if create else o.detach().requires_grad_(o.requires_grad)
                  for o in ops]
            wrt = [x for x in xs if x.requires_grad]
            with enable_grad():
                out = branch(*xs)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            got = iter(grad(outs, wrt, list(grads), create_graph=create, allow_unused=True))
            return (None,) + tuple(next(got) if x.requires_grad else None for x in xs)
    return CondAutogradOp


def while_loop(cond_fn, body_fn, carried_inputs):
    """Apply ``body_fn`` to the carried values while ``cond_fn`` holds; returns them as a
    tuple."""
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"carried_inputs must be a tuple or list, got "
                           f"{type(carried_inputs)}")
    carried = tuple(carried_inputs)
    while _truth(cond_fn(*carried)):
        out = body_fn(*carried)
        carried = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return carried


# ----- interchange ------------------------------------------------------------------------
class _Capsule:
    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def from_dlpack(ext_tensor):
    """A tensor sharing memory with ``ext_tensor`` (any object with ``__dlpack__``, or a
    DLPack capsule)."""
    if not hasattr(ext_tensor, "__dlpack__"):
        ext_tensor = _Capsule(ext_tensor)
    return _make(np.from_dlpack(ext_tensor))


def to_dlpack(tensor):
    """A DLPack capsule of ``tensor``'s memory."""
    return tensor._data.__dlpack__()


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over the memory of an object implementing the buffer protocol."""
    np_dtype = ember.empty(0, dtype=dtype)._data.dtype
    arr = np.frombuffer(buffer, dtype=np_dtype, count=count, offset=offset)
    if not arr.flags.writeable:
        warnings.warn("The given buffer is not writable, and PyTorch does not support "
                      "non-writable tensors.", UserWarning, stacklevel=2)
    return _make(arr, requires_grad)


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None,
              pin_memory=False):
    """``size`` elements of ``dtype`` read from ``filename``; with ``shared=True`` the
    tensor maps the file, and writes to it reach the file."""
    dtype = dtype or ember.get_default_dtype()
    np_dtype = ember.empty(0, dtype=dtype)._data.dtype
    if shared:
        arr = np.memmap(filename, dtype=np_dtype, mode="r+", shape=(int(size),))
    else:
        arr = np.fromfile(filename, dtype=np_dtype, count=int(size))
        if arr.size < size:
            raise RuntimeError(f"from_file: {filename} holds {arr.size} elements, fewer than "
                               f"size={size}")
    return _make(arr)


# ----- math helpers ------------------------------------------------------------------------
def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
          requires_grad=False):
    """Deprecated in torch: ``[start, start + step, ..., end]`` with ``end`` included."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        raise TypeError("range() missing required argument 'end'")
    n = int(math.floor((end - start) / step)) + 1
    dtype = dtype or ember.get_default_dtype()
    out_t = ember.tensor([start + i * step for i in _builtin_range(max(n, 0))], dtype=dtype,
                         device=device)
    return out_t.requires_grad_(requires_grad)


def _builtin_range(n):
    import builtins
    return builtins.range(n)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of ``x``: columns ``x**(N-1) ... x**0`` (``increasing``
    reverses them)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    out = ember.linalg.vander(x, N=N)
    return out if increasing else out.flip(-1)


@one_node("SegmentReduceBackward0", 1)
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """Reduce consecutive segments of ``data`` along ``axis`` ("sum", "mean", "max",
    "min", "prod"); segments given by ``lengths`` or ``offsets``. Empty segments give
    ``initial``, or 0 (sum), 1 (prod), -inf/inf (max/min), nan (mean)."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: the segments are values of lengths or offsets
        return m.composite_locals("segment_reduce", segment_reduce, locals())
    if indices is not None:
        raise NotImplementedError("segment_reduce(indices=...) (not implemented in torch "
                                  "either)")
    if reduce not in ("sum", "mean", "max", "min", "prod"):
        raise RuntimeError(f"reduce argument must be either sum, max, mean, min or prod, "
                           f"got {reduce}")
    if lengths is not None:
        lens = [int(v) for v in (lengths.tolist() if isinstance(lengths, Tensor) else lengths)]
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(int).tolist()
    elif offsets is not None:
        offs = [int(v) for v in (offsets.tolist() if isinstance(offsets, Tensor)
                                 else offsets)]
        starts, lens = offs[:-1], [b - a for a, b in zip(offs, offs[1:])]
    else:
        raise RuntimeError("Either lengths or offsets must be defined")
    axis = axis % data.ndim
    empty = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf,
             "mean": math.nan}[reduce]
    parts = []
    for s, n in zip(starts, lens):
        if n == 0:
            shape = list(data.shape)
            shape[axis] = 1
            fill = empty if initial is None else initial
            parts.append(ember.full(shape, fill, dtype=data.dtype, device=data.device))
            continue
        seg = data.narrow(axis, s, n)
        if reduce == "sum":
            r = seg.sum(axis, keepdim=True)
        elif reduce == "prod":
            r = seg.prod(axis, keepdim=True)
        elif reduce == "mean":
            r = seg.mean(axis, keepdim=True)
        elif reduce == "max":
            r = seg.amax(axis, keepdim=True)
        else:
            r = seg.amin(axis, keepdim=True)
        if initial is not None:
            if reduce == "sum":
                r = r + initial
            elif reduce == "prod":
                r = r * initial
            elif reduce == "max":
                r = r.clamp(min=initial)
            elif reduce == "min":
                r = r.clamp(max=initial)
            else:
                r = (seg.sum(axis, keepdim=True) + initial) / (n + 1)
        parts.append(r)
    return ember.cat(parts, axis)


def lobpcg(A, k=None, B=None, X=None, n=None, iK=None, niter=None, tol=None, largest=None,
           method=None, tracker=None, ortho_iparams=None, ortho_fparams=None,
           ortho_bparams=None):
    """The ``k`` largest (or smallest) eigenpairs of the symmetric ``A`` (of
    ``A x = lambda B x`` with ``B``): ``(E, X)``.

    torch iterates LOBPCG; ember solves the dense eigenproblem exactly (what LOBPCG
    converges to), so ``niter``, ``tol``, ``iK``, ``tracker`` and ``method`` have nothing
    to tune. Eigenvectors are defined up to sign.
    """
    if k is None:
        k = X.shape[-1] if X is not None else (1 if n is None else n)
    largest = True if largest is None else largest
    if A.shape[-1] < 3 * k:
        raise ValueError(f"LPBPCG algorithm is not applicable when the number of A rows "
                         f"(={A.shape[-1]}) is smaller than 3 x the number of requested "
                         f"eigenpairs (={k})")
    A = A.to_dense() if A.is_sparse else A
    if B is None:
        evals, evecs = ember.linalg.eigh(A)
    else:
        B = B.to_dense() if B.is_sparse else B
        L = ember.linalg.cholesky(B)
        Li = ember.linalg.inv(L)
        evals, V = ember.linalg.eigh(Li @ A @ Li.mT)
        evecs = Li.mT @ V
    if largest:
        evals, evecs = evals.flip(-1), evecs.flip(-1)
    return evals[..., :k], evecs[..., :k]
