"""The ``add*`` products: ``beta * input + alpha * product`` for ``addmm``, ``addmv``,
``addr``, ``baddbmm`` and ``addbmm``.

Where an eager graph is recorded each is PyTorch's one node over its three inputs
(:data:`ADD_PRODUCTS`, the node classes below); elsewhere (no gradient, captures,
transforms, integer and boolean operands) the product and the scaled sum are composed
from ember's ops.
"""
import numpy as np

from ember._tensor import Tensor, _mode_active
from ember.autograd.node import Primitive
from ember.ops import matmul_graph as _mg
from ember.ops._einsum import _tname
from ember.ops._inplace import inplace_method
from ember.ops._util import opmath, traced_ints
from ember.ops._util import write_out as _write_out
from ember.ops.linalg import bmm, mm, mv, outer
from ember.ops.product_saves import pack_crossed as _pack_crossed
from ember.ops.product_saves import record_crossed as _record_crossed

__all__ = ["addmm", "addmv", "addbmm", "baddbmm", "addr"]


class _AddProduct(Primitive):
    """``beta * input + alpha * product(a, b)``: the ``add*`` family (``addmm``,
    ``addmv``, ``addr``, ``baddbmm``, ``addbmm``) as one node over PyTorch's three inputs
    in its order. ``input`` broadcasts to the product (the engine sums its gradient
    back); ``beta == 0`` ignores its values (NaN and inf do not propagate) but keeps its
    edge, as PyTorch's node does."""
    _base_class = True
    save_inputs = (1, 2)
    _crossed = (2, 1)  # each factor kept only where the other needs a gradient
    _record = _record_crossed
    _pack_saved = _pack_crossed
    broadcasts = True

    @opmath  # float16/bfloat16: the product, the scaling and the sum in float32, one rounding
    def forward(self, input, a, b, beta=1, alpha=1):
        if a.dtype.kind in "iu":  # PyTorch converts the scalars to the integer dtype
            alpha, beta = int(alpha), int(beta)
        self.beta, self.alpha = beta, alpha
        prod = self._product(a, b)
        if beta != 0 and (a.size == 0 or b.size == 0):
            # a product summed over nothing: beta * input alone, as PyTorch's gemm
            # (C = beta * C), so a -0.0 in the input stays -0.0
            prod[...] = input if beta == 1 else input * beta  # (a new array of zeros)
            return prod
        if alpha != 1:
            prod = prod * alpha
        if beta == 0:
            return prod
        return prod + (input if beta == 1 else input * beta)

    # the gradients of a matrix product (addmm, baddbmm); the others override them
    @staticmethod
    def _grad_a(g, b):
        return g.matmul(b.mT)

    @staticmethod
    def _grad_b(g, a):
        return a.mT.matmul(g)

    def _scale(self, g, s):
        from ember.ops._util import cj
        return g if s == 1 else g * cj(s)

    def backward(self, gy):
        from ember.ops._util import cj
        a, b = self.saved_tensors
        e = self._edges
        gi = self._scale(gy, self.beta) if e[0] is not None else None
        ga = self._scale(self._grad_a(gy, cj(b)), self.alpha) if e[1] is not None else None
        gb = self._scale(self._grad_b(gy, cj(a)), self.alpha) if e[2] is not None else None
        return gi, ga, gb


class AddmmScaled(_AddProduct):
    """``addmm``: ``beta * input + alpha * (mat1 @ mat2)``."""
    _node_name = "AddmmBackward0"

    @staticmethod
    def _product(a, b):
        from ember.ops.linalg import MatMul
        return MatMul.forward(None, a, b)


class Addmv(_AddProduct):
    """``addmv``: ``beta * input + alpha * (mat @ vec)``."""

    @staticmethod
    def _product(a, b):
        from ember.ops.linalg import MatMul
        return MatMul.forward(None, a, b)

    @staticmethod
    def _grad_a(g, vec):
        return g.unsqueeze(1) * vec.unsqueeze(0)

    @staticmethod
    def _grad_b(g, mat):
        return mat.mT.matmul(g)


class Addr(_AddProduct):
    """``addr``: ``beta * input + alpha * outer(vec1, vec2)``."""

    @staticmethod
    def _product(a, b):
        return a[:, None] * b[None, :]

    @staticmethod
    def _grad_a(g, vec2):
        return g.matmul(vec2)

    @staticmethod
    def _grad_b(g, vec1):
        return g.mT.matmul(vec1)


class Baddbmm(_AddProduct):
    """``baddbmm``: ``beta * input + alpha * bmm(batch1, batch2)``."""

    @staticmethod
    def _product(a, b):
        from ember.ops.linalg import bmm_arrays
        return bmm_arrays(a, b)


class Addbmm(_AddProduct):
    """``addbmm``: ``beta * input + alpha * sum_i batch1[i] @ batch2[i]``."""

    def _product(self, a, b):
        from ember.ops.linalg import bmm_arrays
        self.count = a.shape[0]
        prod = bmm_arrays(a, b)
        return prod.sum(0, dtype=prod.dtype)

    def _grad_a(self, g, b):
        return g.expand(self.count, *g.shape).matmul(b.mT)

    def _grad_b(self, g, a):
        return a.mT.matmul(g.expand(self.count, *g.shape))


ADD_PRODUCTS = (AddmmScaled, Addmv, Addr, Baddbmm, Addbmm)



def _scaled_add(input, prod, beta, alpha, empty=False):
    """``beta * input + alpha * prod``; ``empty``: the product is a sum over nothing, so
    the result is ``beta * input`` alone, as PyTorch's gemm (a -0.0 stays -0.0)."""
    if input.dtype != prod.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{_tname(input._data.dtype)} and {_tname(prod._data.dtype)}")
    if prod._data.dtype.kind in "iu":  # PyTorch converts the scalars to the integer dtype
        alpha, beta = int(alpha), int(beta)
    if alpha != 1:
        prod = prod * alpha
    # beta == 0 ignores input entirely (its nan and inf do not propagate), as in PyTorch
    input = input.expand(prod.shape)
    if beta == 0:
        return prod
    if empty:
        return (input if beta == 1 else input * beta).clone()
    return prod + (input if beta == 1 else input * beta)


def _empty(a, b):
    """Whether the product of ``a`` and ``b`` is a sum over nothing."""
    return isinstance(a, Tensor) and isinstance(b, Tensor) and \
        (a.numel() == 0 or b.numel() == 0)


def _eager_add(cls, input, check, a, b, beta, alpha, out):
    """``cls`` (a node of :data:`ADD_PRODUCTS`: PyTorch's one node over its
    three inputs) where a graph is recorded in eager mode, or for float16/bfloat16 (one
    rounding, see ``runs_node``), after ``check(a, b)`` (the product's own errors); None
    elsewhere: captures and transforms record the composite, whose ops have their
    rules."""
    if out is not None or not isinstance(input, Tensor) or \
            not _mg.runs_node(input.dtype, input, a, b) or \
            input._data.dtype.kind not in "fc" and input.dtype.name != "bfloat16":
        return None
    prod_shape = check(a, b)
    if input.dtype != a.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{_tname(input._data.dtype)} and {_tname(a._data.dtype)}")
    try:
        shape = np.broadcast_shapes(tuple(input.shape), prod_shape)
    except ValueError:
        shape = None
    if shape != prod_shape:
        input.expand(prod_shape)  # PyTorch's error for an input that does not broadcast
    return cls.apply(input, a, b, beta=beta, alpha=alpha)


def _mm_shape(a, b):
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        mm(a.detach(), b.detach())  # its error
    return (a.shape[0], b.shape[1])


def _mv_shape(a, b):
    if a.dim() != 2 or b.dim() != 1 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        mv(a.detach(), b.detach())  # its error
    return (a.shape[0],)


def _bmm_shape(a, b):
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] or \
            a.shape[2] != b.shape[1] or a.dtype != b.dtype:
        bmm(a.detach(), b.detach())  # its error
    return (a.shape[0], a.shape[1], b.shape[2])


def _sum_bmm_shape(a, b):
    return _bmm_shape(a, b)[1:]


def _outer_shape(a, b):
    if a.dim() != 1 or b.dim() != 1:
        outer(a.detach(), b.detach())  # its error
    return (a.shape[0], b.shape[0])


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to the product."""
    if _mode_active[0] and out is None and (r := traced_ints(beta, alpha)) is not None:
        # a traced factor: a branch in Python (beta 0, alpha 1), so the call is one node
        return r[0].composite("addmm", addmm, (input, mat1, mat2),
                              {"beta": r[1][0], "alpha": r[1][1]})
    if isinstance(mat1, Tensor) and isinstance(mat2, Tensor):
        if mat1.dtype != mat2.dtype:
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                               f"{_tname(mat1._data.dtype)} and {_tname(mat2._data.dtype)}")
        res = _eager_add(AddmmScaled, input, _mm_shape, mat1, mat2, beta, alpha, out)
        if res is not None:
            return res
    # (out= must not share memory with input in part; with the factors it may, as torch)
    return _write_out(_scaled_add(input, mm(mat1, mat2), beta, alpha, _empty(mat1, mat2)), out,
                      None, (input,))


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat @ vec)``."""
    if _mode_active[0] and out is None and (r := traced_ints(beta, alpha)) is not None:
        # a traced factor: a branch in Python (beta 0, alpha 1), so the call is one node
        return r[0].composite("addmv", addmv, (input, mat, vec),
                              {"beta": r[1][0], "alpha": r[1][1]})
    if isinstance(mat, Tensor) and isinstance(vec, Tensor):
        res = _eager_add(Addmv, input, _mv_shape, mat, vec, beta, alpha, out)
        if res is not None:
            return res
    return _write_out(_scaled_add(input, mv(mat, vec), beta, alpha, _empty(mat, vec)), out,
                      None, (input,))


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    if _mode_active[0] and out is None and (r := traced_ints(beta, alpha)) is not None:
        # a traced factor: a branch in Python (beta 0, alpha 1), so the call is one node
        return r[0].composite("baddbmm", baddbmm, (input, batch1, batch2),
                              {"beta": r[1][0], "alpha": r[1][1]})
    if isinstance(batch1, Tensor) and isinstance(batch2, Tensor):
        res = _eager_add(Baddbmm, input, _bmm_shape, batch1, batch2, beta, alpha, out)
        if res is not None:
            return res
    return _write_out(_scaled_add(input, bmm(batch1, batch2), beta, alpha,
                                  _empty(batch1, batch2)), out, None, (input,))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]`` (the batch is summed)."""
    if _mode_active[0] and out is None and (r := traced_ints(beta, alpha)) is not None:
        # a traced factor: a branch in Python (beta 0, alpha 1), so the call is one node
        return r[0].composite("addbmm", addbmm, (input, batch1, batch2),
                              {"beta": r[1][0], "alpha": r[1][1]})
    if isinstance(batch1, Tensor) and isinstance(batch2, Tensor):
        res = _eager_add(Addbmm, input, _sum_bmm_shape, batch1, batch2, beta, alpha,
                         out)
        if res is not None:
            return res
    prod = bmm(batch1, batch2)
    # summed in the operands' dtype: a plain integer sum would promote int32 to int64
    return _write_out(_scaled_add(input, prod.sum(0, dtype=prod.dtype), beta, alpha,
                                  _empty(batch1, batch2)), out, "addbmm", (input,))


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * outer(vec1, vec2)``."""
    if input.dtype.name == vec1.dtype.name == vec2.dtype.name == "bool":
        # torch's boolean addr: (beta and input) or (alpha and vec1 x vec2), still bool
        prod = outer(vec1, vec2)
        both = (input if beta else input & False) | (prod if alpha else prod & False)
        return _write_out(both.expand(prod.shape) if both.shape != prod.shape else both,
                          out, "addr")
    if isinstance(vec1, Tensor) and isinstance(vec2, Tensor) and vec1.dtype == vec2.dtype:
        res = _eager_add(Addr, input, _outer_shape, vec1, vec2, beta, alpha, out)
        if res is not None:
            return res
    return _write_out(_scaled_add(input, outer(vec1, vec2), beta, alpha), out, "addr",
                      (input, vec1, vec2))


for _fn in (addmm, addmv, addbmm, baddbmm, addr):
    setattr(Tensor, _fn.__name__, _fn)
    setattr(Tensor, _fn.__name__ + "_", inplace_method(_fn))
