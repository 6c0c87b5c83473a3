"""Linear algebra products: matmul and its relatives, einsum, tensordot, trace, cdist.

Inverses, determinants and solves live in ``ember.ops.linalg_solve``,
decompositions in ``ember.ops.linalg_decomp`` and the vector norm in
``ember.ops.vector_norms``; the ``ember.linalg`` namespace gathers them under
PyTorch's names.
"""
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder, _mode_stack
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import gemm as _gemm
from ember.backend import lapack as _lapack
from ember.backend import threads as _threads
from ember.backend.dtypes import FROM_NP
from ember.ops import _batch, _batch_nn, _jvp
from ember.ops import matmul_graph as _mg
from ember.ops import product_saves as _saves
from ember.ops._einsum import Diagonal, _tname, einsum
from ember.ops._util import (
    cj,
    not_implemented_for,
    reduced_float,
    refuse_kinds,
    traced_ints,
    wrap_dim,
)
from ember.ops._util import write_out as _write_out
from ember.ops.composite_node import CompositeNode, call, one_node
from ember.ops.shape import _try_view

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger",
           "matrix_power", "kron", "tensordot", "einsum", "trace", "cross", "cdist",
           "chain_matmul"]

# C++ names PyTorch prints in its matmul dtype errors
_CNAME = {"float32": "float", "float64": "double", "float16": "c10::Half",
          "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
          "int16": "short int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}




def _cname(np_dtype):
    name = FROM_NP[np_dtype].name
    return _CNAME.get(name, name)


def _need_tensors(fname, names, *args):
    """PyTorch's TypeError for a non-Tensor argument."""
    for pos, (n, a) in enumerate(zip(names, args)):
        if not isinstance(a, Tensor):
            raise TypeError(f"{fname}(): argument '{n}' (position {pos + 1}) must be Tensor, "
                            f"not {type(a).__name__}")


# ----- matmul ------------------------------------------------------------------------------
def _shape_str(shape):
    return "x".join(map(str, shape))


def _dtype_mismatch(da, db, na, nb):
    """PyTorch's message for operands of two dtypes, which names the kernel ``a @ b``
    reaches for these ranks (dot, addmv, bmm or mm)."""
    from ember.ops._util import type_name
    if na == 1 and nb == 1:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{type_name(da)} and {type_name(db)}")
    if na >= 2 and nb == 1:  # a matrix (or folded batch of them) times a vector
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{type_name(db)}, {type_name(da)}, and {type_name(db)}")
    if nb >= 3:  # a batched right operand: PyTorch expands both and calls bmm
        raise RuntimeError(f"expected scalar type {type_name(da)} but found {type_name(db)}")
    raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                       f"{_cname(da)} != {_cname(db)}")


def _matmul_check(a, b):
    """PyTorch's errors for ``a @ b`` (dtype, rank, inner and batch sizes), on arrays."""
    if a.dtype != b.dtype and a.ndim and b.ndim:
        _dtype_mismatch(a.dtype, b.dtype, a.ndim, b.ndim)
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    if a.dtype == np.bool_:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if a.ndim > 2 or b.ndim > 2:
        ba, bb = a.shape[:-2], b.shape[:-2]
        n = max(len(ba), len(bb))
        pa, pb = (1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb
        for d in range(n - 1, -1, -1):
            if pa[d] != pb[d] and pa[d] != 1 and pb[d] != 1:
                raise RuntimeError(f"The size of tensor a ({pa[d]}) must match the size of "
                                   f"tensor b ({pb[d]}) at non-singleton dimension {d}")
    if ka == kb:
        return
    if a.ndim == 1 and b.ndim == 1:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{ka}] and src [{kb}] to "
                           f"have the same number of elements, but got {ka} and {kb} elements "
                           "respectively")
    if a.ndim == 2 and b.ndim == 1:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat "
                           f"({_shape_str(a.shape)}), vec ({kb})")
    if b.ndim <= 2:
        rows = math.prod(a.shape[:-1])
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{ka} and "
                           f"{_shape_str(b.shape if b.ndim == 2 else (kb, 1))})")
    batch = math.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                       f"[{batch}, {ka}] but got: [{batch}, {kb}].")


class MatMul(Primitive):
    """``a @ b`` with PyTorch's rules for 1-D and batched (broadcast) operands.

    Gradients come out in the broadcast batch shape; the engine sums them back to
    each operand's shape (``broadcasts``). Each operand is kept for backward only where
    the other requires grad (``product_saves``), as PyTorch keeps them.
    """
    _node_name = "MatmulBackward0"
    broadcasts = True
    save_inputs = (0, 1)
    _crossed = (1, 0)
    _record = _saves.record_crossed
    _pack_saved = _saves.pack_crossed

    def forward(self, a, b):
        _matmul_check(a, b)
        if a.dtype.kind == "V":
            # bfloat16: products accumulated in float32 and rounded once, as PyTorch's
            return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
        if _threads.MANY and (a.ndim == 1 or b.ndim == 1 or a.dtype.kind == "c") and \
                a.shape[-1] > _threads.same_bits_k(a.dtype.char):
            # a matrix-vector or complex product (``gemm.matmul``'s threads take real
            # matrices only): OpenBLAS's threads change its sums past the bound (for
            # complex, not measured: 0), so one BLAS thread
            with _lapack.one_thread():
                return _gemm.matmul(a, b)
        return _gemm.matmul(a, b)

    def backward(self, gy):
        a, b = self.saved_tensors
        e = self._edges
        if _threads.MANY and e[0] is not None and e[1] is not None and \
                not _grad_state.grad_enabled and not _mode_active[0]:
            # (under a mode, e.g. the profiler, the Tensor ops below: their rows)
            r = _paired_matrix_grads(gy._data, a._data, b._data)
            if r is not None:
                return r
        # an operand left unsaved (no gradient reads it) is a vector where the output
        # has fewer dims than the saved one's product with a matrix would
        nd = gy._data.ndim
        va = a._data.ndim == 1 if a is not None else _vector_beside(b, nd)
        vb = b._data.ndim == 1 if b is not None else _vector_beside(a, nd)
        if va and vb:
            return (gy * cj(b) if e[0] is not None else None), \
                (gy * cj(a) if e[1] is not None else None)
        # a 1-D operand acts as a row (left) or column (right) vector
        a2 = a.unsqueeze(0) if va and a is not None else a
        b2 = b.unsqueeze(-1) if vb and b is not None else b
        g2 = gy.unsqueeze(-2) if va else gy.unsqueeze(-1) if vb else gy
        ga = gb = None
        if e[0] is not None:
            ga = g2.matmul(cj(b2).mT)
            if va:
                ga = ga.squeeze(-2)
        if e[1] is not None:
            gb = cj(a2).mT.matmul(g2)
            if vb:
                gb = gb.squeeze(-1)
        return ga, gb

    jvp = _jvp.multilinear(0, 1)
    batch = _batch_nn.matmul
    torchscript = "matmul"


def _paired_matrix_grads(g, a, b):
    """``MatMul``'s gradients ``g @ b.T`` and ``a.T @ g`` of two real NumPy matrices at
    more than one ember thread, nothing recorded: the two products at once, each whole
    at one BLAS thread (``threads.pair``); the same ``gemm.matmul`` calls as the Tensor
    ops below make, so the same bits. None for other operands."""
    if type(g) is not np.ndarray or type(a) is not np.ndarray or \
            type(b) is not np.ndarray or g.ndim != 2 or a.ndim != 2 or b.ndim != 2 or \
            not (g.dtype == a.dtype == b.dtype) or g.dtype.char not in "fd":
        return None
    ga, gb = _threads.pair(lambda: _gemm.matmul(g, b.T), lambda: _gemm.matmul(a.T, g),
                           g.size * a.shape[1])
    return _make(ga), _make(gb)


def _vector_beside(other, out_ndim):
    """Whether the unsaved operand of ``matmul`` was 1-D, from the saved ``other`` and
    the output's rank: beside a vector the output is 0-D; beside a matrix or batch of
    N dims, a vector drops one (N - 1 dims), where any other operand keeps N or more."""
    nd = other._data.ndim
    return out_ndim == 0 if nd == 1 else out_ndim < nd


class Mm(MatMul):
    _grads_in_input_shapes = True  # no batch dims to broadcast
    torchscript = "mm"


class Mv(MatMul):
    _grads_in_input_shapes = True  # no batch dims to broadcast
    torchscript = "mv"


class Dot(MatMul):
    _grads_in_input_shapes = True  # no batch dims to broadcast
    torchscript = "dot"


class Vdot(Dot):
    """``vdot``'s node (``VdotBackward0``); a complex first operand is conjugated first."""
    _node_name = "VdotBackward0"
    _op_name = "Dot"   # the same op: its spellings write it


class Bmm(MatMul):
    torchscript = "bmm"
    _grads_in_input_shapes = True  # one batch size for both: nothing broadcasts

    def forward(self, a, b):
        return bmm_arrays(a, b)


def _gemm_strides(x):
    """Whether BLAS can read the matrices of the NumPy array ``x`` as they lie (one of
    the last two dims of unit stride, the other spanning a row or column)."""
    if type(x) is not np.ndarray or x.ndim < 2:
        return True
    isz = x.itemsize
    (r, c), (sr, sc) = x.shape[-2:], x.strides[-2:]
    return (sc == isz and sr % isz == 0 and sr >= max(c, 1) * isz) or \
        (sr == isz and sc % isz == 0 and sc >= max(r, 1) * isz)


def bmm_arrays(a, b):
    """``bmm`` on arrays, with PyTorch's CPU results where they are not finite."""
    if a.dtype.char in "fdFD":
        # NumPy multiplies matrices BLAS cannot read (an expanded operand's zero
        # strides) by a plain loop, whose float32 sums drift far more than a gemm's;
        # PyTorch's bmm copies such an operand first, and so does this
        if not _gemm_strides(a):
            a = np.ascontiguousarray(a)
        if not _gemm_strides(b):
            b = np.ascontiguousarray(b)
    out = MatMul.forward(None, a, b)
    if a.dtype in (np.float32, np.float64) and b.ndim == 3 and \
            a.shape[1] * a.shape[2] * b.shape[2] < 400 and a.size and b.size:
        # PyTorch's CPU bmm of small matrices sums each row's products one by one
        # from +0.0, in the working precision: where the result is not finite (NaN/inf
        # input, or overflow) BLAS's order and fused multiply-adds may give another
        # class of result (-inf for torch's NaN from inf - inf), so redo it that way
        if not np.isfinite(out).all():
            with np.errstate(all="ignore"):
                terms = a[:, :, :, None] * b[:, None, :, :]
                out = np.cumsum(terms, axis=2)[:, :, -1] + 0.0
    return out


def _matmul_node(a, b):
    na, nb = a._data.ndim, b._data.ndim
    if na == 2 and nb == 2:
        return Mm
    if na == 1 and nb == 1:
        return Dot
    if na == 2 and nb == 1:
        return Mv
    if na == 3 and nb == 3 and a._data.shape[0] == b._data.shape[0]:
        return Bmm
    return MatMul


def matmul(input, other, *, out=None):
    """Matrix product of two tensors, as ``torch.matmul``.

    1-D operands act as vectors (a row on the left, a column on the right, the
    added dim removed from the result); dims before the last two are batch dims
    and broadcast. ``torch.randn(2, 1, 3, 4) @ torch.randn(5, 4, 2)`` has shape
    ``(2, 5, 3, 2)``.
    """
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        _need_tensors("matmul", ["input", "other"], input, other)
    if out is None and _mg.records_graph(input, other):
        # recorded with PyTorch's nodes (UnsafeViewBackward0 over BmmBackward0...)
        _matmul_check(input._data, other._data)
        return _mg.matmul_graph(input, other)
    res = _matmul_node(input, other).apply(input, other)
    return res if out is None else _write_out(res, out)


def mm(input, mat2, *, out=None):
    """Product of two matrices (2-D tensors, no broadcasting)."""
    _need_tensors("mm", ["input", "mat2"], input, mat2)
    if input.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    return _write_out(Mm.apply(input, mat2), out)


def bmm(input, mat2, *, out=None):
    """Batched product of a (b, n, m) and a (b, m, p) tensor (no broadcasting)."""
    _need_tensors("bmm", ["input", "mat2"], input, mat2)
    if input.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if mat2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if input.dtype != mat2.dtype:
        _dtype_mismatch(input._data.dtype, mat2._data.dtype, 3, 3)
    b, _, m = input.shape
    if mat2.shape[0] != b or mat2.shape[1] != m:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{b}, {m}] but got: [{mat2.shape[0]}, {mat2.shape[1]}].")
    return _write_out(Bmm.apply(input, mat2), out)


def mv(input, vec, *, out=None):
    """Product of a matrix and a vector."""
    _need_tensors("mv", ["input", "vec"], input, vec)
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.dim()}, "
                           f"{vec.dim()}")
    if input.dtype != vec.dtype:
        _dtype_mismatch(input._data.dtype, vec._data.dtype, 2, 1)
    return _write_out(Mv.apply(input, vec), out)


def dot(input, tensor, *, out=None):
    """Dot product of two 1-D tensors of the same dtype."""
    _need_tensors("dot", ["input", "tensor"], input, tensor)
    return _write_out(_dot("dot", input, tensor), out)


def vdot(input, other, *, out=None):
    """Dot product of two 1-D tensors, conjugating the first (real tensors: ``dot``)."""
    _need_tensors("vdot", ["input", "other"], input, other)
    if input.is_complex() and other.dtype == input.dtype:
        input = input.conj()
    return _write_out(_dot("vdot", input, other, Vdot), out)


def _dot(name, a, b, cls=Dot):
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name} : expected both vectors to have same dtype, but found "
                           f"{_tname(a._data.dtype)} and {_tname(b._data.dtype)}")
    return cls.apply(a, b)


def inner(input, other, *, out=None):
    """Sum of products over the last dim; shape ``input.shape[:-1] + other.shape[:-1]``."""
    _need_tensors("inner", ["input", "other"], input, other)
    if input.dim() == 0 or other.dim() == 0:
        return _write_out(input * other, out)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    return _write_out(tensordot(input, other, dims=([-1], [-1])), out)


def outer(input, vec2, *, out=None):
    """Outer product of two 1-D tensors: ``out[i, j] = input[i] * vec2[j]``."""
    _need_tensors("outer", ["input", "vec2"], input, vec2)
    if input.dim() != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {input.dim()}-D")
    if vec2.dim() != 1:
        raise RuntimeError(f"outer: Expected 1-D argument vec2, but got {vec2.dim()}-D")
    # PyTorch's composite: the first vector reshaped to a column, broadcast against the
    # second
    return _write_out(input.reshape(-1, 1) * vec2, out, "outer", (input, vec2))


ger = outer


def chain_matmul(*matrices, out=None):
    """Product of a chain of 2-D tensors (deprecated in PyTorch for ``linalg.multi_dot``)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    if len(matrices) == 1:
        return _write_out(matrices[0].clone(), out)
    return _write_out(multi_dot_chain(matrices), out)


def _chain_order(dims):
    """``split[i][j]``: where the cheapest product of matrices ``i..j`` splits (matrix
    ``k`` is ``dims[k]`` x ``dims[k + 1]``); the first of equal costs, as PyTorch."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k
    return split


def multi_dot_chain(tensors):
    """The product of ``tensors`` (2-D, the first and last may be 1-D) in the cheapest
    order, built as PyTorch builds it: vectors unsqueezed to matrices, ``mm`` nodes in
    PyTorch's order (its rule for three, the cheapest split for more), and a ``view``
    to the result's shape on top, so the graph and the rounding are PyTorch's."""
    ts = list(tensors)
    shape = ([] if ts[0].dim() == 1 else [ts[0].shape[0]]) + \
        ([] if ts[-1].dim() == 1 else [ts[-1].shape[-1]])
    if ts[0].dim() == 1:
        ts[0] = ts[0].unsqueeze(0)
    if ts[-1].dim() == 1:
        ts[-1] = ts[-1].unsqueeze(-1)
    if len(ts) == 2:
        res = mm(ts[0], ts[1])
    elif len(ts) == 3:
        a, b = ts[0].shape
        c, d = ts[1].shape[1], ts[2].shape[1]
        if a * c * (b + d) > b * d * (a + c):   # (AB)C costs more than A(BC)
            res = mm(ts[0], mm(ts[1], ts[2]))
        else:
            res = mm(mm(ts[0], ts[1]), ts[2])
    else:
        split = _chain_order([t.shape[0] for t in ts] + [ts[-1].shape[1]])

        def product(i, j):
            if i == j:
                return ts[i]
            k = split[i][j]
            return mm(product(i, k), product(k + 1, j))
        res = product(0, len(ts) - 1)
    return res.view(shape)


# ----- powers, Kronecker, tensordot ----------------------------------------------------------
def matrix_power(input, n, *, out=None):
    """``input`` (a square matrix or batch of them) to the integer power ``n``.

    ``n = 0`` gives identity matrices, negative ``n`` powers of the inverse.
    """
    if _mode_active[0] and out is None and (r := traced_ints(n)) is not None:
        # a traced power: its squarings are a loop in Python, so the call is one node
        return r[0].composite("linalg_matrix_power", matrix_power, (input,) + r[1], {})
    _need_tensors("matrix_power", ["input"], input)
    if input.dim() < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    rows, cols = input.shape[-2:]
    if rows != cols:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {rows} by {cols} matrices")
    n = int(n)
    if n == 0:
        eye = _make(_eye_like(input._data, rows), False)
        # identities copied over a copy of input: still depending on it, with a zero
        # gradient (PyTorch's graph: the copy's node)
        return _write_out(input.clone().copy_(eye.expand(input.shape)), out, "matrix_power")
    if n < 0:
        from ember.ops.linalg_solve import inverse
        input = inverse(input)
        n = -n
    if n == 3:  # PyTorch's order for a cube: (A @ A) @ A
        return _write_out(input.matmul(input).matmul(input), out, "matrix_power")
    result = None
    base = input
    while True:
        if n & 1:
            result = base if result is None else result.matmul(base)
        n >>= 1
        if not n:
            break
        base = base.matmul(base)
    return _write_out(result if result is not input else result.clone(), out, "matrix_power")


def _eye_like(arr, n):
    xp = array_module(arr)
    return xp.eye(n, dtype=arr.dtype)


def kron(input, other, *, out=None):
    """Kronecker product; the operand with fewer dims gets leading size-1 dims."""
    _need_tensors("kron", ["input", "other"], input, other)
    nd = max(input.dim(), other.dim())
    sa = (1,) * (nd - input.dim()) + tuple(input.shape)
    sb = (1,) * (nd - other.dim()) + tuple(other.shape)
    ia = tuple(s for d in sa for s in (d, 1))
    ib = tuple(s for d in sb for s in (1, d))
    shape = tuple(x * y for x, y in zip(sa, sb))
    if out is None and _mg.records_graph(input, other) and \
            _try_view(input._data, ia) is not None and \
            _try_view(other._data, ib) is not None:
        # PyTorch's nodes: each operand and the product under ``_unsafe_view``
        prod = _mg.UnsafeView.apply(input, ia) * _mg.UnsafeView.apply(other, ib)
        return _mg.UnsafeView.apply(prod, shape)
    return _write_out((input.reshape(ia) * other.reshape(ib)).reshape(shape), out, "kron",
                      (input, other))


def tensordot(a, b, dims=2, out=None):
    """Contract ``dims`` of ``a`` with ``dims`` of ``b``.

    ``dims`` is an int (the last ``dims`` of ``a`` with the first of ``b``) or a
    pair of lists of dims.
    """
    _need_tensors("tensordot", ["a", "b"], a, b)
    if _mode_active[0] and not isinstance(dims, Tensor) and \
            (m := _mode_recorder((a, b))) is not None:  # one call: its broadcasts follow sizes
        return m.composite_locals("tensordot", tensordot, locals())
    if isinstance(dims, Tensor):
        if _mode_active[0]:
            # the dims contracted become Python numbers: a compiled graph would replay them
            from ember._graph.capture import branch_on_values
            branch_on_values(dims, "tensordot's dims")
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        dims = int(dims)
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da = list(range(a.dim() - dims, a.dim()))
        db = list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise RuntimeError("both dimension lists should have same length")
        da = [wrap_dim(d, a.dim()) for d in da]
        db = [wrap_dim(d, b.dim()) for d in db]
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y] and 1 in (a.shape[x], b.shape[y]):
            # a size-1 contracted dim broadcasts against the other, as in PyTorch
            if a.shape[x] == 1:
                a = a.expand(a.shape[:x] + (b.shape[y],) + a.shape[x + 1:])
            else:
                b = b.expand(b.shape[:y] + (a.shape[x],) + b.shape[y + 1:])
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[x]} in dim {x} and second has size {b.shape[y]} in "
                               f"dim {y}")
    fa = [d for d in range(a.dim()) if d not in da]
    fb = [d for d in range(b.dim()) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    sa = [a.shape[d] for d in fa]
    sb = [b.shape[d] for d in fb]
    if not sa and not sb:  # everything contracted: PyTorch takes one dot product
        pa, pb = a.permute(da), b.permute(db)
        res = Dot.apply(pa if pa.dim() == 1 else _td_reshape(pa, (k,)),
                        pb if pb.dim() == 1 else _td_reshape(pb, (k,)))
    else:
        res = Mm.apply(_td_reshape(a.permute(fa + da), (math.prod(sa), k)),
                       _td_reshape(b.permute(db + fb), (k, math.prod(sb))))
    return _write_out(res.reshape(sa + sb), out)


def _td_reshape(x, shape):
    """PyTorch's ``reshape`` inside ``tensordot``: a clone under ``_unsafe_view`` where no
    view has that shape (in an eager graph), else a view."""
    return x.reshape(shape)


def trace(input):
    """Sum of the main diagonal of a matrix (integers sum as int64)."""
    _need_tensors("trace", ["input"], input)
    return call(Trace, input)


def _trace(input):
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    refuse_kinds(input, "b", "\"trace\" not implemented for '{type}'", NotImplementedError)
    return Diagonal.apply(input, 0, 1).sum(-1)


class Trace(CompositeNode):
    """``trace``'s node, PyTorch's ``TraceBackward0``: it keeps only the input's shape
    (the gradient is ``gy`` on the diagonal), so the input may change before backward."""
    _node_name = "TraceBackward0"
    save_inputs = ()
    composite = staticmethod(_trace)

    def forward(self, x):
        self.in_shape = x.shape
        return CompositeNode.forward(self, x)

    def backward(self, gy):
        from ember.ops.elementwise import where
        # (made where gy is: a cuda gradient gets a cuda mask)
        on_diagonal = _make(np.eye(*self.in_shape, dtype=bool)).to(gy.device)
        return (where(on_diagonal, gy, gy.new_zeros(())),)


# ----- cross, cdist ----------------------------------------------------------------------
def cross(input, other, dim=None, *, out=None):
    """Cross product of 3-vectors along ``dim`` (default: the first dim of size 3).

    The operands broadcast against each other.
    """
    _need_tensors("cross", ["input", "other"], input, other)
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {_tname(input._data.dtype)} but found "
                           f"{_tname(other._data.dtype)}")
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape)) \
        if input.shape != other.shape else tuple(input.shape)
    if dim is None:
        dim = next((d for d, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    if out is not None:  # torch's cross refuses any memory out= shares with an operand
        from ember.ops._util import refuse_out_overlap
        refuse_out_overlap(out, (input, other))
    return _write_out(_cross(input, other, dim, "cross"), out)


def _cross(a, b, dim, name):
    d = wrap_dim(dim, max(a.dim(), b.dim()))
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"{name}: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    return Cross.apply(a, b, d)


def _fused_diff(p, q, r, s):
    """``p * q - r * s`` as PyTorch's CPU kernel computes it: ``r * s`` rounded, then
    subtracted from the exact ``p * q`` in one fused multiply-add (so an overflowing
    ``p * q`` minus an infinite ``r * s`` is that infinity's opposite, not NaN)."""
    rs = r * s
    wide = {np.dtype(np.float32): np.float64, np.dtype(np.float64): np.longdouble}.get(p.dtype)
    if wide is None:
        return p * q - rs
    return (p.astype(wide) * q.astype(wide) - rs.astype(wide)).astype(p.dtype)


class Cross(Primitive):
    """The cross product of 3-vectors along one axis; operands broadcast."""
    _node_name = "LinalgCrossBackward0"
    broadcasts = True
    save_inputs = (0, 1)

    def forward(self, a, b, axis):
        self.axis = axis
        a, b = np.broadcast_arrays(a, b)
        a0, a1, a2 = (np.take(a, i, axis) for i in range(3))
        b0, b1, b2 = (np.take(b, i, axis) for i in range(3))
        with np.errstate(all="ignore"):
            return np.stack([_fused_diff(a1, b2, a2, b1), _fused_diff(a2, b0, a0, b2),
                             _fused_diff(a0, b1, a1, b0)], axis)

    def backward(self, gy):
        a, b = self.saved_tensors
        e, d = self._edges, self.axis
        return (Cross.apply(cj(b), gy, d) if e[0] is not None else None,
                Cross.apply(gy, cj(a), d) if e[1] is not None else None, None)

    jvp = _jvp.multilinear(0, 1)
    batch = _batch_nn.cross
    torchscript = "cross"


class Cdist(Primitive):
    """p-norm distances between the rows of two batches of matrices."""
    _node_name = "CdistBackward0"
    broadcasts = True
    save_inputs = (0, 1)
    save_output = True
    batch = _batch.elementwise
    torchscript = "cdist"

    def forward(self, x1, x2, p):
        self.p = p
        diff = np.abs(x1[..., :, None, :] - x2[..., None, :, :])
        if p == 0:  # each differing coordinate counts 1; a NaN difference stays NaN
            return np.minimum(np.ceil(diff), 1).sum(-1)
        if p == 1:
            return diff.sum(-1)
        if p == 2:
            return np.sqrt((diff * diff).sum(-1))
        if math.isinf(p):
            if diff.shape[-1] == 0:
                return diff.sum(-1)
            return diff.max(-1)
        return (diff ** p).sum(-1) ** (1.0 / p)

    def backward(self, gy):
        x1, x2, dist = self.saved_tensors
        p = self.p
        e = self._edges
        if p == 2:
            # sum_j g_ij (x1_i - x2_j) / d_ij without the (P, R, M) differences
            w = (gy / dist).masked_fill(dist == 0, 0.0)
            g1 = x1 * w.sum(-1, keepdim=True) - w.matmul(x2) if e[0] is not None else None
            g2 = x2 * w.sum(-2).unsqueeze(-1) - w.mT.matmul(x1) if e[1] is not None else None
            return g1, g2, None
        diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
        g = gy.unsqueeze(-1)
        d = dist.unsqueeze(-1)
        zero = d == 0
        if p == 0:  # a step function: zero gradient, even where the difference is NaN
            gd = diff.new_zeros(diff.shape)
        elif p == 1:
            gd = g * diff.sign()
        elif math.isinf(p):
            gd = g * diff.sign() * (diff.abs() == d)
        elif p < 2:
            gd = (diff.sign() * diff.abs().pow(p - 1) * g / d.pow(p - 1)).masked_fill(zero, 0.0)
            if p < 1:
                gd = gd.masked_fill(diff == 0, 0.0)
        else:
            gd = (diff * diff.abs().pow(p - 2) * g / d.pow(p - 1)).masked_fill(zero, 0.0)
        return (gd.sum(-2) if e[0] is not None else None,
                -gd.sum(-3) if e[1] is not None else None, None)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Distances ``||x1[..., i, :] - x2[..., j, :]||_p`` for (B, P, M) and (B, R, M) inputs.

    Batch dims broadcast. For ``p=2`` the distances come from matrix products when
    either operand has more than 25 rows (``compute_mode``'s default, as in PyTorch),
    ``sqrt(|x1|^2 - 2 x1 x2^T + |x2|^2)``, which needs no (P, R, M) intermediate.
    """
    _need_tensors("cdist", ["x1", "x2"], x1, x2)
    if x1.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D")
    if x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if t._data.dtype.kind != "f" and not reduced_float(t._data.dtype):
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{_tname(t._data.dtype)}")
    if x1._data.dtype.itemsize < 4:
        # PyTorch's CPU kernel has no half-precision version (it would lose the distances)
        raise not_implemented_for("cdist", x1._data.dtype)
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"expected scalar type {_tname(x1._data.dtype)} but found "
                           f"{_tname(x2._data.dtype)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    P, R = x1.shape[-2], x2.shape[-2]
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
            compute_mode == "use_mm_for_euclid_dist_if_necessary" and (P > 25 or R > 25))):
        if any(not getattr(_mode_stack[i], "observer", False) for i in range(_mode_active[0])):
            # under a capture or transform (not the profiler, which only watches):
            # broadcasting matmul, no sizes frozen into expand/view (a trace replays at
            # other batch sizes)
            n1 = (x1 * x1).sum(-1, keepdim=True)
            n2 = (x2 * x2).sum(-1, keepdim=True)
            return (n1 - 2 * x1.matmul(x2.mT) + n2.mT).clamp_min(1e-30).sqrt()
        # PyTorch's steps: a broadcast batch is expanded and flattened to one dim (each
        # operand made contiguous and viewed), one _euclidean_dist, viewed back at the end
        batch = tuple(np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
        if math.prod(batch) != 1:
            from ember.ops.shape import Expand
            M = x1.shape[-1]
            x1 = Expand.apply(x1, batch + (P, M)).contiguous().view(-1, P, M)
            x2 = Expand.apply(x2, batch + (R, M)).contiguous().view(-1, R, M)
        return _euclidean_dist(x1, x2).view(*batch, P, R)
    return Cdist.apply(x1, x2, float(p))


@one_node("EuclideanDistBackward0", 2)
def _euclidean_dist(x1, x2):
    """``sqrt(|x1|^2 - 2 x1 x2^T + |x2|^2)`` row by row: matrix products, no (P, R, M)
    intermediate."""
    n1 = (x1 * x1).sum(-1, keepdim=True)
    n2 = (x2 * x2).sum(-1, keepdim=True)
    return (n1 - 2 * x1.matmul(x2.mT) + n2.mT).clamp_min(1e-30).sqrt()


_TENSOR_METHODS = {
    "matmul": matmul, "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "vdot": vdot,
    "inner": inner, "outer": outer, "ger": outer, "matrix_power": matrix_power,
    "kron": kron, "trace": trace, "cross": cross,
}
for _name, _fn in _TENSOR_METHODS.items():
    setattr(Tensor, _name, _fn)


def _matmul_op(self, other):
    if not isinstance(other, Tensor):
        return NotImplemented
    if _mg.records_graph(self, other):
        _matmul_check(self._data, other._data)
        return _mg.matmul_graph(self, other)
    return _matmul_node(self, other).apply(self, other)


def _rmatmul_op(self, other):
    return matmul(other, self) if isinstance(other, Tensor) else NotImplemented


Tensor.__matmul__ = _matmul_op
Tensor.__rmatmul__ = _rmatmul_op
