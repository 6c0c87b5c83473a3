"""TorchScript spellings of the ops that take a dim (or dims) and an aten schema of the
same shape: diagonals (``diagonal``, ``diag_embed``), the statistics (``var``, ``std``
and with their mean), the selecting reductions (``aminmax``, ``mode``, ``median`` and
``nanmedian`` along a dim), the running extremes (``cummax``, ``cummin``) and the
writes along a dim (``index_copy``, ``scatter_add``); and the calls recorded whole
because a traced 0-d tensor gave them an int they use in Python
(:data:`ember._graph.names.INT_ARG_CALLS`), written as the aten call PyTorch's tracer
records after its ``aten::Int``, so a saved trace runs at the value given then."""
import numpy as np

from ember._graph.ir import Ref
from ember.jit._codegen_emitter import emits, literal
from ember.ops import diagonals, extrema, gather_scatter, scan, variance


def _int(em, v):
    """An int argument: a tensor (a 0-d integer one given where an int goes, kept as a
    tensor by the call) read with ``int()``, as PyTorch's tracer records ``aten::Int``."""
    if isinstance(v, Ref) and v.value.type == "Tensor":
        return f"int({em.e(v)})"
    return em.e(v)


def _ints(em, xs):
    if isinstance(xs, (int, Ref)):
        xs = (xs,)
    return "[" + ", ".join(_int(em, x) for x in xs) + "]"


# ----- primitives ------------------------------------------------------------------------
@emits(diagonals.Diagonal)
def _diagonal(em, node, x, offset, d1, d2):
    return f"torch.diagonal({em.e(x)}, {em.e(offset)}, {em.e(d1)}, {em.e(d2)})"


@emits(diagonals.DiagEmbed)
def _diag_embed(em, node, x, offset, d1, d2):
    return f"torch.diag_embed({em.e(x)}, {em.e(offset)}, {em.e(d1)}, {em.e(d2)})"


def _statistic(aten):
    def emit(em, node, x, axes, correction, keepdim):
        out = (f"torch.{aten}({em.e(x)}, {em.ints(tuple(axes))}, correction="
               f"{literal(correction)}, keepdim={literal(bool(keepdim))})")
        if len(node.outputs) == 1:
            return out
        res = em.tmp(out)
        return [f"{res}[0]", f"{res}[1]"]
    return emit


emits(variance._Var)(_statistic("var"))
emits(variance._Std)(_statistic("std"))
emits(variance._VarMean)(_statistic("var_mean"))
emits(variance._StdMean)(_statistic("std_mean"))


@emits(extrema._Aminmax)
def _aminmax(em, node, x, axes, keepdim, along_dim):
    dim = em.e(axes[0]) if along_dim else "None"
    res = em.tmp(f"torch.aminmax({em.e(x)}, dim={dim}, keepdim={literal(bool(keepdim))})")
    return [f"{res}[0]", f"{res}[1]"]


def _select_dim(aten):
    def emit(em, node, x, axis, keepdim):
        # a 0-d input's node has no axis (None): aten's dim 0 wraps on it
        res = em.tmp(f"torch.{aten}({em.e(x)}, {em.e(0 if axis is None else axis)}, "
                     f"{literal(bool(keepdim))})")
        return [f"{res}[0]", f"{res}[1]"]
    return emit


emits(extrema._ModeDim)(_select_dim("mode"))
emits(extrema._MedianDim)(_select_dim("median"))
emits(extrema._NanmedianDim)(_select_dim("nanmedian"))


def _running(aten):
    def emit(em, node, x, axis):
        res = em.tmp(f"torch.{aten}({em.e(x)}, {em.e(0 if axis is None else axis)})")
        return [f"{res}[0]", f"{res}[1]"]
    return emit


emits(scan._Cummax)(_running("cummax"))
emits(scan._Cummin)(_running("cummin"))


@emits(gather_scatter.IndexCopy)
def _index_copy(em, node, x, src, idx, dim):
    if isinstance(idx, np.ndarray):  # an index that is no traced value: a constant
        idx = f"torch.tensor({literal(idx.tolist())})"
    else:
        idx = em.e(idx)
    return f"torch.index_copy({em.e(x)}, {em.e(dim)}, {idx}, {em.e(src)})"


@emits(gather_scatter.ScatterAdd)
def _scatter_add(em, node, x, src, idx, dim):
    return f"torch.scatter_add({em.e(x)}, {em.e(dim)}, {em.e(idx)}, {em.e(src)})"


# ----- calls recorded whole for a traced int argument ------------------------------------
@emits("select")
def _select(em, node, input, dim, index):
    return f"torch.select({em.e(input)}, {_int(em, dim)}, {_int(em, index)})"
