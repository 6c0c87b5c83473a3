"""TorchScript spellings of the ops that take a dim (or dims) and an aten schema of the
same shape: diagonals (``diagonal``, ``diag_embed``), the statistics (``var``, ``std``
and with their mean), the selecting reductions (``aminmax``, ``mode``, ``median`` and
``nanmedian`` along a dim), the running extremes (``cummax``, ``cummin``) and the
writes along a dim (``index_copy``, ``scatter_add``); ``addcmul``/``addcdiv`` with
their Scalar, ``all``/``any`` over dims, ``prod``, ``nansum`` and ``cumprod`` with their
dtype, ``div`` rounding ``'trunc'``, the whole-tensor ``max``/``min``/``median``/
``nanmedian``; and the calls recorded whole
because a traced 0-d tensor gave them an int they use in Python
(:data:`ember._graph.names.INT_ARG_CALLS`), written as the aten call PyTorch's tracer
records after its ``aten::Int``, so a saved trace runs at the value given then."""
import numpy as np

from ember._graph.ir import Ref
from ember.jit._codegen_emitter import emits, literal
from ember.ops import (
    diagonals,
    division,
    extrema,
    gather_scatter,
    index_along,
    reduction,
    scan,
    ternary,
    variance,
)


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
               f"{_number(em, correction)}, keepdim={literal(bool(keepdim))})")
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


@emits(index_along.IndexCopy)
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


@emits("select_scatter")
def _select_scatter(em, node, input, src, dim, index):
    return (f"torch.select_scatter({em.e(input)}, {em.e(src)}, {_int(em, dim)}, "
            f"{_int(em, index)})")


@emits("glu")
def _glu(em, node, input, dim=-1):
    return f"torch.glu({em.e(input)}, {_int(em, dim)})"


@emits("unfold")
def _unfold(em, node, input, dimension, size, step):
    return f"{em.e(input)}.unfold({_int(em, dimension)}, {_int(em, size)}, {_int(em, step)})"


@emits("rot90")
def _rot90(em, node, input, k=1, dims=(0, 1)):
    return f"torch.rot90({em.e(input)}, {_int(em, k)}, {_ints(em, dims)})"


@emits("diff")
def _diff(em, node, input, n=1, dim=-1, prepend=None, append=None):
    return (f"torch.diff({em.e(input)}, {_int(em, n)}, {_int(em, dim)}, {em.e(prepend)}, "
            f"{em.e(append)})")


@emits("linalg_matrix_power")
def _matrix_power(em, node, input, n):
    return f"torch.linalg_matrix_power({em.e(input)}, {_int(em, n)})"


@emits("linalg_vander")
def _vander(em, node, x, N=None):
    return f"torch.linalg_vander({em.e(x)}, N={_int(em, N)})"


@emits("pixel_shuffle", "pixel_unshuffle")
def _pixel_shuffle(em, node, input, factor):
    return f"torch.{node.op}({em.e(input)}, {_int(em, factor)})"


@emits("mvlgamma")
def _mvlgamma(em, node, input, p):
    return f"torch.mvlgamma({em.e(input)}, {_int(em, p)})"


@emits("constant_pad_nd")
def _constant_pad_nd(em, node, input, pad, value=0):
    return f"torch.constant_pad_nd({em.e(input)}, {_ints(em, pad)}, {em.e(value)})"


@emits("repeat")
def _repeat(em, node, input, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    return f"{em.e(input)}.repeat({_ints(em, sizes)})"


@emits("hsplit", "vsplit", "dsplit")
def _split_at(em, node, input, indices_or_sections):
    arg = _ints(em, indices_or_sections) if isinstance(indices_or_sections, (tuple, list)) \
        else _int(em, indices_or_sections)
    res = em.tmp(f"torch.{node.op}({em.e(input)}, {arg})")
    return [f"{res}[{i}]" for i in range(len(node.outputs))]


@emits("nonzero_static")
def _nonzero_static(em, node, input, size, fill_value=-1):
    return (f"torch.nonzero_static({em.e(input)}, size={_int(em, size)}, "
            f"fill_value={_int(em, fill_value)})")


def _window(em, v, nd):
    """An ``int[nd]`` argument given as one int or a list (``[]``: None, the default)."""
    if v is None:
        return "[]"
    if isinstance(v, (tuple, list)):
        return _ints(em, v)
    return _ints(em, [v] * nd)


@emits("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(em, node, input, kernel_size, stride=None, padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    nd = int(node.op[-2])
    head = (f"torch.{node.op}({em.e(input)}, {_window(em, kernel_size, nd)}, "
            f"{_window(em, stride, nd)}, {_window(em, padding, nd)}, "
            f"{literal(bool(ceil_mode))}, {literal(bool(count_include_pad))}")
    if nd == 1:
        return head + ")"
    div = "None" if divisor_override is None else _int(em, divisor_override)
    return f"{head}, {div})"


@emits("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive_max_pool(em, node, input, output_size, return_indices=False):
    nd = int(node.op[-2])
    res = em.tmp(f"torch.{node.op}({em.e(input)}, {_window(em, output_size, nd)})")
    return [f"{res}[0]", f"{res}[1]"] if return_indices else f"{res}[0]"


@emits("as_strided")
def _as_strided(em, node, input, size, stride, storage_offset=None):
    off = "None" if storage_offset is None else _int(em, storage_offset)
    return f"torch.as_strided({em.e(input)}, {_ints(em, size)}, {_ints(em, stride)}, {off})"


@emits("as_strided_scatter")
def _as_strided_scatter(em, node, input, src, size, stride, storage_offset=None):
    off = "None" if storage_offset is None else _int(em, storage_offset)
    return (f"torch.as_strided_scatter({em.e(input)}, {em.e(src)}, {_ints(em, size)}, "
            f"{_ints(em, stride)}, {off})")


def _like_kwargs(em, node, dtype, device, requires_grad):
    if device is not None or requires_grad:
        raise NotImplementedError(f"jit codegen: {node.op}(device=, requires_grad=True)")
    return "" if dtype is None else f", dtype={em.e(dtype)}"


@emits("new_zeros", "new_ones")
def _new_filled(em, node, input, *size, dtype=None, device=None, requires_grad=False):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return (f"{em.e(input)}.{node.op}({_ints(em, size)}"
            f"{_like_kwargs(em, node, dtype, device, requires_grad)})")


@emits("new_full")
def _new_full(em, node, input, size, fill_value, dtype=None, device=None, requires_grad=False):
    return (f"{em.e(input)}.new_full({_ints(em, size)}, {em.e(fill_value)}"
            f"{_like_kwargs(em, node, dtype, device, requires_grad)})")


@emits("addmm", "addmv", "baddbmm", "addbmm")
def _add_product(em, node, input, a, b, beta=1, alpha=1):
    return (f"torch.{node.op}({em.e(input)}, {em.e(a)}, {em.e(b)}, beta={_int(em, beta)}, "
            f"alpha={_int(em, alpha)})")


@emits("dist")
def _dist(em, node, input, other, p=2):
    return f"torch.dist({em.e(input)}, {em.e(other)}, {_int(em, p)})"


@emits("renorm")
def _renorm(em, node, input, p, dim, maxnorm):
    return f"torch.renorm({em.e(input)}, {_int(em, p)}, {_int(em, dim)}, {_int(em, maxnorm)})"


@emits("histc")
def _histc(em, node, input, bins=100, min=0, max=0):
    return f"torch.histc({em.e(input)}, {_int(em, bins)}, {_int(em, min)}, {_int(em, max)})"


@emits("grid_sampler_2d", "grid_sampler_3d")
def _grid_sampler(em, node, input, grid, interpolation_mode, padding_mode, align_corners):
    return (f"torch.{node.op}({em.e(input)}, {em.e(grid)}, {_int(em, interpolation_mode)}, "
            f"{_int(em, padding_mode)}, {em.e(align_corners)})")


@emits("im2col")
def _im2col(em, node, input, kernel_size, dilation=1, padding=0, stride=1):
    """``F.unfold``: aten's ``im2col`` (a 3-D input gains and loses its batch dim)."""
    win = [_window(em, v, 2) for v in (kernel_size, dilation, padding, stride)]
    if len(node.inputs[0].shape) == 3:
        return f"torch.squeeze(torch.im2col(torch.unsqueeze({em.e(input)}, 0), " \
            f"{', '.join(win)}), 0)"
    return f"torch.im2col({em.e(input)}, {', '.join(win)})"


def _number(em, v):
    """A Scalar argument: an int read from a traced tensor, or a number."""
    if v is None:
        return "None"
    if isinstance(v, Ref):
        return _int(em, v)
    return literal(float(v)) if isinstance(v, float) else literal(v)


def _dims(em, dim):
    if dim is None:
        return "None"
    return _ints(em, dim if isinstance(dim, (tuple, list)) else (dim,))


def _dtype_kw(em, dtype):
    return "" if dtype is None else f", dtype={em.e(dtype)}"


@emits("linalg_vector_norm")
def _vector_norm_call(em, node, x, ord=2, dim=None, keepdim=False, dtype=None):
    return (f"torch.linalg_vector_norm({em.e(x)}, {_number(em, ord)}, {_dims(em, dim)}, "
            f"{literal(bool(keepdim))}{_dtype_kw(em, dtype)})")


@emits("linalg_norm")
def _linalg_norm(em, node, A, ord=None, dim=None, keepdim=False, dtype=None):
    if isinstance(ord, str):
        raise NotImplementedError("jit codegen: linalg.norm with a string ord and a traced dim")
    return (f"torch.linalg_norm({em.e(A)}, {_number(em, ord)}, {_dims(em, dim)}, "
            f"{literal(bool(keepdim))}{_dtype_kw(em, dtype)})")


@emits("norm")
def _norm(em, node, input, p="fro", dim=None, keepdim=False, dtype=None):
    """``torch.norm`` as the aten op PyTorch's tracer records: ``nuclear_norm`` and
    ``frobenius_norm`` for the matrix norms named by a string."""
    if isinstance(p, str):
        if dtype is not None or p not in ("nuc", "fro"):
            raise NotImplementedError(f"jit codegen: norm(p={p!r}, dtype=...)")
        aten = "nuclear_norm" if p == "nuc" else "frobenius_norm"
        dims = "[0, 1]" if dim is None else _dims(em, dim)
        return f"torch.{aten}({em.e(input)}, {dims}, {literal(bool(keepdim))})"
    if dim is None and dtype is None:
        return f"torch.norm({em.e(input)}, {_number(em, p)})"
    dims = _dims(em, tuple(range(len(node.inputs[0].shape))) if dim is None else dim)
    return (f"torch.norm({em.e(input)}, {_number(em, p)}, {dims}, "
            f"{literal(bool(keepdim))}{_dtype_kw(em, dtype)})")


@emits("linalg_tensorsolve")
def _tensorsolve(em, node, A, B, dims=None):
    return f"torch.linalg_tensorsolve({em.e(A)}, {em.e(B)}, {_dims(em, dims)})"


@emits("cov")
def _cov(em, node, input, correction=1, fweights=None, aweights=None):
    return (f"torch.cov({em.e(input)}, correction={_int(em, correction)}, "
            f"fweights={em.e(fweights)}, aweights={em.e(aweights)})")


@emits("gradient")
def _gradient(em, node, input, spacing=None, dim=None, edge_order=1):
    if spacing is not None and not isinstance(spacing, (int, float, Ref)):
        raise NotImplementedError("jit codegen: gradient with a spacing per dim")
    sp = "" if spacing is None else f"spacing={_number(em, spacing)}, "
    d = "" if dim is None else f"dim={_dims(em, dim)}, "
    res = em.tmp(f"torch.gradient({em.e(input)}, {sp}{d}edge_order={_int(em, edge_order)})")
    return [f"{res}[{i}]" for i in range(len(node.outputs))]


@emits("linspace", "logspace")
def _range(em, node, start, end, steps, base=10.0, dtype=None, device=None,
           requires_grad=False):
    from ember.jit._codegen_ops import _factory_kwargs
    # (ends given as tensors are aten's Tensor overloads; a traced int is a Scalar)
    ends = [em.e(e) if isinstance(e, Ref) and e.value.type == "Tensor" else _number(em, e)
            for e in (start, end)]
    extra = f", {_number(em, base)}" if node.op == "logspace" else ""
    return (f"torch.{node.op}({ends[0]}, {ends[1]}, {_int(em, steps)}{extra}, "
            f"{_factory_kwargs(em, {'dtype': dtype, 'device': device})})")


@emits("movedim")
def _movedim(em, node, input, source, destination):
    if isinstance(source, (tuple, list)):
        return f"torch.movedim({em.e(input)}, {_ints(em, source)}, {_ints(em, destination)})"
    return f"torch.movedim({em.e(input)}, {_int(em, source)}, {_int(em, destination)})"


# ----- the pointwise ops with a Scalar, and all/any over dims -----------------------------
def _addc(aten):
    def emit(em, node, x, t1, t2, value):
        return f"torch.{aten}({em.e(x)}, {em.e(t1)}, {em.e(t2)}, value={_number(em, value)})"
    return emit


emits(ternary.Addcmul)(_addc("addcmul"))
emits(ternary.Addcdiv)(_addc("addcdiv"))


def _all_any(aten):
    def emit(em, node, x, axes, keepdim):
        if axes is None:
            axes = tuple(range(len(node.inputs[0].shape))) if keepdim else None
        if axes is None:
            return f"torch.{aten}({em.e(x)})"
        return (f"torch.{aten}({em.e(x)}, {em.ints(tuple(np.atleast_1d(axes)))}, "
                f"{literal(bool(keepdim))})")
    return emit


emits(reduction._All)(_all_any("all"))
emits(reduction._Any)(_all_any("any"))


# ----- products and nansum: a dtype given is spelled as torch's dtype= --------------------
def _np_dtype_kw(np_dtype):
    if np_dtype is None:
        return ""
    from ember.backend import dtypes
    return f", dtype={literal(dtypes.from_numpy_dtype(np.dtype(np_dtype)))}"


@emits(reduction.Nansum)
def _nansum(em, node, x, axes, keepdim, np_dtype):
    if axes is None:
        axes = tuple(range(len(node.inputs[0].shape)))
    return (f"torch.nansum({em.e(x)}, {em.ints(tuple(np.atleast_1d(axes)))}, "
            f"{literal(bool(keepdim))}{_np_dtype_kw(np_dtype)})")


@emits(reduction.Prod)
def _prod(em, node, x, axis, keepdim, np_dtype):
    if axis is None:
        out = f"torch.prod({em.e(x)}{_np_dtype_kw(np_dtype)})"
        if keepdim:
            # aten's prod has no keepdim over all dims: the result reshaped to the rank
            out = f"torch.reshape({out}, {em.ints((1,) * len(node.inputs[0].shape))})"
        return out
    return f"torch.prod({em.e(x)}, {em.e(axis)}, {literal(bool(keepdim))}{_np_dtype_kw(np_dtype)})"


@emits(scan.Cumprod)
def _cumprod(em, node, x, axis, np_dtype):
    # a 0-d input's node has no axis (None): aten's dim is 0 there
    return f"torch.cumprod({em.e(x)}, {em.e(0 if axis is None else axis)}{_np_dtype_kw(np_dtype)})"


@emits(division.TruncDivide)
def _trunc_divide(em, node, a, b):
    return f"torch.div({em.e(a)}, {em.e(b)}, rounding_mode=\"trunc\")"


def _whole(aten):
    def emit(em, node, x):
        return f"torch.{aten}({em.e(x)})"
    return emit


emits(extrema._MaxAll)(_whole("max"))
emits(extrema._MinAll)(_whole("min"))
emits(extrema._MedianAll)(_whole("median"))
emits(extrema._NanmedianAll)(_whole("nanmedian"))
