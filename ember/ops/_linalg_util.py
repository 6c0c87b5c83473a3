"""What ember's linear algebra ops share: ``LinAlgError``, the named result tuples,
the input checks (and which ops take complex input), and small helpers.

The ops themselves live in ``ember.ops.linalg_solve`` (inverses, determinants,
solves, the matrix exponential) and ``ember.ops.linalg_decomp`` (Cholesky, eigh,
SVD, QR, pseudo-inverse, rank).
"""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.autograd.saved import _SavedOutput
from ember.backend import array_module
from ember.backend import lapack as _lapack
from ember.ops._einsum import _tname
from ember.ops.linalg import _write_out
from ember.ops.reduction import _return_type, return_types


class LinAlgError(RuntimeError):
    """A linear algebra routine failed on its input (``torch.linalg.LinAlgError``)."""


def _named(name, fields):
    """A ``torch.return_types.<name>`` namedtuple, also found as ``ember.return_types.<name>``."""
    cls = _return_type(name, fields)
    cls.__module__ = __name__
    cls.__qualname__ = "_rt_" + name
    globals()["_rt_" + name] = cls  # a module-level name, so the tuples pickle
    setattr(return_types, name, cls)
    return cls


_rt = {n: _named(n, f) for n, f in [
    ("linalg_slogdet", "sign logabsdet"), ("slogdet", "sign logabsdet"),
    ("linalg_inv_ex", "inverse info"), ("linalg_solve_ex", "result info"),
    ("linalg_cholesky_ex", "L info"), ("linalg_eigh", "eigenvalues eigenvectors"),
    ("linalg_svd", "U S Vh"), ("svd", "U S V"), ("linalg_qr", "Q R"), ("qr", "Q R")]}


def _results(name, results, out, table=None):
    """The named result tuple (``name`` looked up in ``table``, this module's result types
    by default); with ``out`` (a tuple of tensors) written into those."""
    if out is not None:
        if len(out) != len(results):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(results)} Tensors")
        short = name.removeprefix("_").removesuffix("_with_info")  # torch.lu's is _lu_with_info
        results = [_write_out(r, o, short) for r, o in zip(results, out)]
    return (_rt if table is None else table)[name](*results)


# ----- checks ----------------------------------------------------------------------------
# the ops (by the name their checks use) whose complex path is built; the others refuse
# complex input with an error naming them rather than computing something else
COMPLEX_OPS = frozenset({
    "linalg.inv", "linalg.inv_ex", "linalg.det", "linalg.slogdet", "logdet", "linalg.solve",
    "linalg.solve_triangular", "linalg.cholesky", "cholesky", "cholesky_inverse", "linalg.eigh",
    "linalg.eigvalsh", "linalg.svd", "linalg.svdvals", "svd", "linalg.qr", "qr", "linalg.pinv",
    "linalg.matrix_rank", "linalg.cond", "linalg.lstsq", "geqrf", "linalg.matrix_exp",
    "linalg.lu_factor_ex", "linalg.lu_factor", "linalg.lu", "linalg.lu_solve"})


def _conj(t):
    return t.conj() if t.is_complex() else t


def _check_gauge(a, b, message):
    """Raises when a loss depends on the free phase of complex singular/eigen vectors."""
    if not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-2, atol=1e-2):
        raise RuntimeError(message)


def _mh(t):
    """The conjugate transpose of a complex tensor, the transpose of a real one."""
    return t.mT.conj() if t.is_complex() else t.mT


def _check_float(name, A):
    if not isinstance(A, Tensor):
        raise TypeError(f"{name.replace('.', '_')}(): argument 'A' (position 1) must be Tensor, "
                        f"not {type(A).__name__}")
    dt = A._data.dtype
    if dt.kind == "c" and name.removeprefix("torch.") not in COMPLEX_OPS:
        raise NotImplementedError(f"{name}: complex input ({_tname(dt)}) is not supported yet "
                                  "in ember")
    if dt.names:  # complex32, a structured pair of float16 parts
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got ComplexHalf")
    if dt.kind not in "fc":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {_tname(dt)}")
    if dt.itemsize < 4:
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {_tname(dt)}")


def _check_square(name, A, float_only=True):
    if not isinstance(A, Tensor):
        _check_float(name, A)
    if A.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    if m != n:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {m} by "
                           f"{n} matrices")
    if float_only:
        _check_float(name, A)


def _check_matrix(name, A):
    if not isinstance(A, Tensor):
        _check_float(name, A)
    if A.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    _check_float(name, A)


def _batch_prefix(a, idx):
    return f"(Batch element {idx}): " if a.ndim > 2 else ""


def _first_failure(a, test):
    """Index of the first matrix of the batch ``a`` for which ``test`` fails."""
    flat = np.asarray(a).reshape((-1,) + a.shape[-2:])
    for i, m in enumerate(flat):
        try:
            test(m)
        except np.linalg.LinAlgError:
            return i, m
    return 0, flat[0]


def _zero_pivot(m):
    """LAPACK ``getrf``'s info: the 1-based index of the first exactly zero pivot."""
    a = np.array(m, dtype=np.float64)
    n = a.shape[0]
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return k + 1
        a[[k, p]] = a[[p, k]]
        a[k + 1:, k:] -= np.outer(a[k + 1:, k] / a[k, k], a[k, k:])
    return n


def _singular_error(name, a):
    i, m = _first_failure(a, _lapack.linalg.inv)
    return LinAlgError(f"{name}: {_batch_prefix(a, i)}The diagonal element {_zero_pivot(m)} is "
                       "zero, the inversion could not be completed because the input matrix is "
                       "singular.")


def _eye(like, n):
    return _make(array_module(like._data).eye(n, dtype=like._data.dtype), False)


def _tri_mask(like, n, k, upper):
    """A constant 0/1 matrix of ``like``'s dtype: the triangle on and above/below diag ``k``."""
    xp = array_module(like._data)
    ones = xp.ones((n, n), dtype=like._data.dtype)
    return _make(xp.triu(ones, k) if upper else xp.tril(ones, k), False)


def _needed(g):
    """Whether an output gradient contributes: nonzero, or part of a graph being built."""
    return g is not None and (g._requires_grad or bool(g._data.any()))


class _SavesOutputs(Primitive):
    """A primitive with several outputs whose backward reads them (``saved_outputs``).

    ``apply`` keeps them after the saved inputs in ``saved_tensors``, checked for
    in-place modification and linked to this node, so double backward
    differentiates through them.
    """
    saved_outputs = ()

    @classmethod
    def apply(cls, *args, **params):
        outs = super().apply(*args, **params)
        node = next((o.grad_fn for o in outs if o.grad_fn is not None), None)
        # once per node: a capture, vmap or forward AD runs ``apply`` inside ``apply``
        # (the level below has already appended the outputs to the same node)
        if isinstance(node, cls) and not node.__dict__.get("_outputs_saved"):
            node._outputs_saved = True
            node._saved = list(node._saved or []) + [
                _SavedOutput(outs[nr]._data, outs[nr]._vc, outs[nr]._requires_grad, nr)
                for nr in cls.saved_outputs]
        return outs

