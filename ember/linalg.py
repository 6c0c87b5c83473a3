"""``ember.linalg``: PyTorch's ``torch.linalg`` namespace.

The primitives live in ``ember.ops.linalg`` (products), ``ember.ops.linalg_solve``
(inverses, determinants, solves), ``ember.ops.linalg_decomp`` (decompositions) and
``ember.ops.vector_norms`` (the vector norm); this module adds the norms, which are
composites of the vector norm primitive and the singular values.
"""
import math

from ember._tensor import _mode_active, _mode_recorder
from ember.backend.dtypes import to_dtype
from ember.ops._einsum import _tname
from ember.ops._linalg_util import LinAlgError
from ember.ops._util import int_args, reduced_float, traced_ints, type_name
from ember.ops.composite_node import one_node
from ember.ops.join import cat
from ember.ops.linalg import _cross, _write_out, matmul, matrix_power, multi_dot_chain
from ember.ops.linalg_decomp import (
    cholesky_ex,
    eigh,
    eigvalsh,
    matrix_rank,
    pinv,
    svdvals,
)
from ember.ops.linalg_decomp import cholesky_linalg as cholesky
from ember.ops.linalg_decomp import qr_linalg as qr
from ember.ops.linalg_decomp import svd_linalg as svd
from ember.ops.linalg_solve import (
    det,
    inv,
    inv_ex,
    matrix_exp,
    solve,
    solve_ex,
    solve_triangular,
)
from ember.ops.linalg_solve import slogdet_linalg as slogdet
from ember.ops.vector_norms import VectorNorm

__all__ = ["LinAlgError", "matmul", "det", "slogdet", "inv", "inv_ex", "solve", "solve_ex",
           "solve_triangular", "cholesky", "cholesky_ex", "eigh", "eigvalsh", "svd", "svdvals",
           "qr", "pinv", "matrix_rank", "matrix_power", "cross", "multi_dot", "vecdot", "norm",
           "vector_norm", "matrix_norm", "matrix_exp", "tensorinv", "tensorsolve",
           "vander", "diagonal", "eig", "eigvals", "lstsq", "lu", "lu_factor", "lu_solve",
           "ldl_factor", "householder_product"]


def _dims(dim, ndim, name):
    if dim is None:
        return tuple(range(ndim))
    dim = int_args(dim)  # (0-d integer tensors, as torch takes them)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return tuple(range(ndim))
    m = max(ndim, 1)
    out = []
    for d in dims:
        if not -m <= d < m:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-m}, "
                             f"{m - 1}], but got {d})")
        out.append(d % m if ndim else 0)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{name}: dim {out[0]} appears multiple times in the list of dims")
    return tuple(out) if ndim else ()


def _cast(x, dtype, name):
    """``x`` checked for a norm (floating point or complex) and converted to ``dtype``
    under PyTorch's rules: complex stays complex, real stays real, nothing narrows."""
    src = x._data.dtype
    cplx = src.kind == "c" or bool(src.names)  # complex32 is a structured pair
    if src.kind != "f" and not cplx and not reduced_float(src):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{type_name(src)}")
    if dtype is None:
        return x
    dt = to_dtype(dtype)
    if cplx and not dt.is_complex:
        raise RuntimeError(f"{name}: dtype should be complex for complex inputs, but got "
                           f"{type_name(dt.np)}")
    if not cplx and dt.is_complex:
        raise RuntimeError(f"{name}: dtype should be real for real inputs, but got "
                           f"{type_name(dt.np)}")
    if not (dt.is_floating_point or dt.is_complex) or dt.itemsize < src.itemsize:
        raise RuntimeError(f"{name}: the dtype of the input ({type_name(src)}) should be "
                           f"convertible without narrowing to the specified dtype "
                           f"({type_name(dt.np)})")
    return x.to(dt) if dt.np != src else x


def _casts(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    return dtype is not None


# with a dtype, PyTorch's one node computes in it (no ToCopyBackward0 below)
@one_node("LinalgVectorNormBackward0", 1, when=_casts)
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The vector ``ord``-norm of ``x`` over ``dim`` (all dims when None).

    ``ord`` is any real number or +-inf: ``sum(|x|^ord)^(1/ord)``, with ``ord=0``
    counting nonzeros and +-inf taking the max/min of ``|x|``.
    """
    if _mode_active[0] and out is None and (r := traced_ints(ord, dim)) is not None:
        # a traced order picks the formula in Python: the call is one node
        return r[0].composite("linalg_vector_norm", vector_norm, (x,) + r[1] + (keepdim,),
                              {"dtype": dtype})
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: Expected a non-string ord, but got '{ord}'")
    x = _cast(x, dtype, "linalg.vector_norm")
    axes = _dims(dim, x.dim(), "linalg.vector_norm")
    p = float(ord)
    if p < 0 or math.isinf(p):
        if any(x.shape[a] == 0 for a in axes) or (x.numel() == 0 and not axes):
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                               "tensor because the operation does not have an identity")
    return _write_out(VectorNorm.apply(x, p, axes, bool(keepdim)), out)


def _extreme(v, largest, shown_dim, dim=-1, keepdim=False):
    """The max (or min) over ``dim`` of nonnegative values: PyTorch's matrix norms
    give 0 for a max over nothing and raise for a min over nothing."""
    if v.shape[dim] == 0:
        if not largest:
            raise RuntimeError(f"amin(): Expected reduction dim {shown_dim} to have non-zero "
                               "size.")
        return v.sum(dim, keepdim)
    # amax/amin (not an inf-norm): ties share the gradient, as in PyTorch
    return v.amax(dim, keepdim) if largest else v.amin(dim, keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """A matrix norm over the two dims ``dim``.

    ``ord``: ``'fro'`` (default), ``'nuc'`` (sum of singular values), 2 / -2 (largest /
    smallest singular value), 1 / -1 (max / min column abs-sum), inf / -inf (max / min
    row abs-sum).
    """
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    A = _cast(A, dtype, "linalg.matrix_norm")
    dims = tuple(dim)
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dims}")
    d0, d1 = (_dims(d, A.dim(), "linalg.matrix_norm")[0] for d in dims)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dims[0]}, "
                           f"{dims[1]})")
    if ord == "fro":
        return _write_out(vector_norm(A, 2, (d0, d1), keepdim), out)
    if ord not in ("nuc", 2, -2, 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if ord in (1, -1, math.inf, -math.inf):
        # PyTorch's steps: the abs-sums over one dim, then their extreme over the other
        # (no permute; the second dim shifts when the first, before it, is dropped)
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        if not keepdim and inner < outer:
            outer -= 1
        sums = vector_norm(A, 1, inner, keepdim)
        return _write_out(_extreme(sums, ord > 0, 0, outer, keepdim), out)
    M = A.movedim((d0, d1), (-2, -1))
    s = svdvals(M)
    res = s.sum(-1, keepdim) if ord == "nuc" else _extreme(s, ord == 2, -1, -1, keepdim)
    if keepdim:
        # back in place by the inverse of the move, as PyTorch (its last node a permute)
        order = [d for d in range(A.dim()) if d not in (d0, d1)] + [d0, d1]
        res = res.unsqueeze(-1).permute([order.index(d) for d in range(A.dim())])
    return _write_out(res, out)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """A vector or matrix norm, as ``torch.linalg.norm``.

    With ``dim`` an int (or 1-tuple) it is ``vector_norm``; a 2-tuple gives
    ``matrix_norm``. Without ``dim``: a 1-D or 2-D input's vector or matrix norm
    when ``ord`` is given, else the 2-norm of all elements.
    """
    if _mode_active[0] and out is None and (r := traced_ints(ord, dim)) is not None:
        # a traced order or dim picks the norm in Python: the call is one node
        return r[0].composite("linalg_norm", norm, (A,) + r[1] + (keepdim,), {"dtype": dtype})
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype,
                               out=out)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got "
                           f"{list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    if A.dim() == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    if A.dim() == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D "
                       f"or 2D. Got {A.dim()}D.")


def cross(input, other, *, dim=-1, out=None):
    """Cross product of 3-vectors along ``dim`` (default -1); operands broadcast."""
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {_tname(input._data.dtype)} but found "
                           f"{_tname(other._data.dtype)}")
    if out is not None:  # torch's cross refuses any memory out= shares with an operand
        from ember.ops._util import refuse_out_overlap
        refuse_out_overlap(out, (input, other))
    return _write_out(_cross(input, other, dim, "linalg.cross"), out)


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices; the first and last may be 1-D (vectors)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        edge = i in (0, len(tensors) - 1)
        if t.dim() != 2 and not (edge and t.dim() == 1):
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.dim()}D")
    return _write_out(multi_dot_chain(tensors), out)


def vecdot(x, y, *, dim=-1, out=None):
    """``sum(conj(x) * y, dim)`` (the dot product along ``dim``, broadcasting; ``x`` is
    conjugated when complex, as torch)."""
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {_tname(x._data.dtype)} and y of type "
                           f"{_tname(y._data.dtype)} instead")
    return _write_out(((x.conj() if x.is_complex() else x) * y).sum(dim), out)


def tensorinv(A, ind=2, *, out=None):
    """The inverse of ``A`` seen as a map from its first ``ind`` dims to the rest."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    left, right = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows, cols = math.prod(left), math.prod(right)
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    from ember.ops.shape import ReshapeAlias
    # PyTorch's inverse is column-major (LAPACK's layout), so reshaping it back to tensor
    # dims is a ``_reshape_alias`` there
    return _write_out(ReshapeAlias.apply(inv(A.reshape(rows, cols)), right + left), out,
                      "tensorinv")


def tensorsolve(A, B, dims=None, *, out=None):
    """The ``X`` with ``tensordot(A, X, X.ndim) == B``."""
    if _mode_active[0] and out is None and (r := traced_ints(dims)) is not None:
        # traced dims order the permutation in Python: the call is one node
        return r[0].composite("linalg_tensorsolve", tensorsolve, (A, B) + r[1], {})
    if dims is not None:
        nd = A.dim()
        dims = [d % nd for d in dims]
        A = A.permute([d for d in range(nd) if d not in dims] + dims)
    rest = tuple(A.shape[B.dim():])
    n = math.prod(rest)
    x = solve(A.reshape(B.numel(), n), B.reshape(B.numel())).reshape(rest)
    return _write_out(x, out, "tensorsolve")


def vander(x, *, N=None):
    """The Vandermonde matrix: ``x[..., None] ** arange(N)`` (increasing powers)."""
    if _mode_active[0] and (r := traced_ints(N)) is not None:
        # a traced count of columns: the expand's size is computed in Python, so one node
        return r[0].composite("linalg_vander", vander, (x,), {"N": r[1][0]})
    kind = x._data.dtype.kind
    if kind == "b" or x._data.dtype.itemsize == 2 and kind == "f" or x.dtype.name == "bfloat16":
        from ember.ops._util import scalar_type_name
        raise RuntimeError("linalg.vander supports floating point, complex, and integer "
                           f"tensors, but got {scalar_type_name(x.dtype)}")
    if kind in "iu":  # torch's cumulative product promotes integers to int64
        x = x.long()
    if x.dim() == 0:  # a 0-d input is one point
        x = x.reshape(1)
    n = x.shape[-1] if N is None else int(N)
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    # PyTorch's: a column of ones, then the running products of x (its graph ends in cat)
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)
    # made like a slice of x's powers (not from its shape): a trace follows x's length
    from ember._factory import ones_like
    ones = ones_like(powers.narrow(-1, 0, 1))
    return cat([ones, powers], -1)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.diagonal(A, offset, dim1, dim2)``, batch-friendly defaults (a view)."""
    import ember
    return ember.diagonal(A, offset, dim1, dim2)


def householder_product(A, tau, *, out=None):
    """The first ``n`` columns of ``H_1 H_2 ... H_k`` with ``H_i = I - tau_i v_i v_i^H``,
    where ``v_i`` is column ``i`` of ``A`` below the diagonal with a 1 on it
    (``torch.linalg.householder_product``). A composite of ember ops, so it is
    differentiable in ``A`` and ``tau``."""
    import ember
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater "
                           "than or equal to input.shape[-1]")
    if n < k:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater "
                           "than or equal to tau.shape[-1]")
    if out is None and _mode_active[0] and (m_ := _mode_recorder((A, tau))) is not None:
        # one node: the reflectors are applied one by one for the sizes read here (a
        # capture would keep the example's)
        return m_.composite_locals("linalg_householder_product", householder_product,
                                   locals())
    rows = ember.arange(m).unsqueeze(-1)
    q = ember.eye(m, n, dtype=A.dtype).expand(*A.shape[:-2], m, n)
    # apply the reflectors last to first: Q = H_1 (H_2 (... (H_k I)))
    for i in range(k - 1, -1, -1):
        v = ember.where(rows > i, A[..., :, i:i + 1], (rows == i).to(A.dtype))
        q = q - tau[..., i:i + 1].unsqueeze(-1) * (v @ (v.mH @ q))  # v^H: LAPACK's ungqr
    if k == 0 and (A.requires_grad or tau.requires_grad):
        # no reflectors: Q is the identity, still attached to the graph as torch's is
        q = q + (A.sum() + tau.sum()) * 0
    return q if out is None else _write_out(q, out, "householder_product")


orgqr = householder_product

from ember.ops.linalg_eig import eig, eigvals  # noqa: E402
from ember.ops.linalg_ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: E402
from ember.ops.linalg_lu import cond, lstsq, lu_factor, lu_factor_ex  # noqa: E402
from ember.ops.linalg_lu import linalg_lu as lu  # noqa: E402
from ember.ops.linalg_lu import linalg_lu_solve as lu_solve  # noqa: E402

__all__ += ["cond", "lu_factor_ex", "ldl_factor_ex", "ldl_solve"]
