"""ember IR op -> ONNX nodes: the converters of shapes, joins, indexing and factories.

The calls the capture records above the primitives (``view``, ``x[key]``, ``size``,
``zeros``, ...) are keyed by name in :data:`EXPORTERS`; the primitives' converters are
attached to their classes with ``@exports(SomeOpClass)``. :mod:`ember.onnx._export_ops`
imports this module, so importing it registers these too.
"""
import numpy as np

from ember._graph.ir import Ref
from ember._graph.symint import TensorInt
from ember.onnx._export import UnsupportedOnnxExport
from ember.onnx._export_registry import _axes, _cast_to, _rank, exports
from ember.ops import diagonals, gather_scatter, index_along, join, scan, shape, sorting

__all__ = []


# ---- shapes ----------------------------------------------------------------------------------

@exports("size")
def _size(g, node, t, dim):
    shape = g.op("Shape", [g.tensor(t)])
    return g.op("Gather", [shape, g.const(np.asarray(dim, np.int64))], axis=0)


_INT = {"int.add": "Add", "int.sub": "Sub", "int.mul": "Mul", "int.floordiv": "Div",
        "int.mod": "Mod"}


@exports(*_INT)
def _int_op(g, node, a, b):
    return g.op(_INT[node.op], [g.tensor(a, dtype=np.int64), g.tensor(b, dtype=np.int64)])


@exports(TensorInt)
def _tensor_int(g, node, v, ndim=None):
    """The int read from a 0-d tensor is that tensor, as int64, in the file (PyTorch's
    exporter feeds ``aten::Int``'s input to the ops that take it as an input); a dim
    given so is refused by the ops that need it as an attribute, as PyTorch's exporter
    refuses it. A negative dim or index is wrapped by the ops that take it."""
    return g.op("Cast", [g.tensor(v)], to=g.elem_type(np.dtype(np.int64)))


@exports("int.neg")
def _int_neg(g, node, a):
    return g.op("Neg", [g.tensor(a, dtype=np.int64)])


def _shape_list(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return list(args[0])
    return list(args)


@exports("view", "reshape")
def _view(g, node, x, *shape, dtype=None):
    from ember.backend.dtypes import dtype as _dtype
    if dtype is not None or len(shape) == 1 and isinstance(shape[0], (_dtype, type, np.dtype)):
        raise UnsupportedOnnxExport("view(dtype) (a reinterpretation of the bytes: ONNX has no "
                                    "such operator)")
    return _reshape(g, x, _shape_list(shape))


def _reshape(g, x, sizes):
    # a literal 0 is a size of 0 (allowzero), not ONNX's "copy this dim"
    zero = any(not isinstance(v, Ref) and v == 0 for v in sizes)
    return g.op("Reshape", [g.tensor(x), g.ints(sizes)], **({"allowzero": 1} if zero else {}))


@exports(shape.View, shape.ReshapeCopy, shape.UnsafeReshape)
def _view_prim(g, node, x, shape, *rest):
    return _reshape(g, x, list(shape))


@exports("expand", shape.Expand)
def _expand(g, node, x, *shape):
    sizes = _shape_list(shape)
    # -1 keeps the input's size: Expand broadcasts, so a 1 there does the same
    sizes = [1 if (not isinstance(s, Ref) and s == -1) else s for s in sizes]
    return g.op("Expand", [g.tensor(x), g.ints(sizes)])


@exports("view_as", "reshape_as")
def _view_as(g, node, x, other):
    return g.op("Reshape", [g.tensor(x), g.op("Shape", [g.tensor(other)])])


@exports("expand_as")
def _expand_as(g, node, x, other):
    return g.op("Expand", [g.tensor(x), g.op("Shape", [g.tensor(other)])])


@exports("flatten")
def _flatten(g, node, x, start_dim=0, end_dim=-1):
    r = _rank(x)
    s, e = start_dim % max(r, 1), end_dim % max(r, 1)
    if e == r - 1 and s <= 1:
        if s == 1:
            return g.op("Flatten", [g.tensor(x)], axis=1)
        return g.op("Reshape", [g.tensor(x), g.const(np.asarray([-1], np.int64))])
    shape = g.op("Shape", [g.tensor(x)])
    parts = []
    if s > 0:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([0], np.int64)),
                                    g.const(np.asarray([s], np.int64))]))
    parts.append(g.const(np.asarray([-1], np.int64)))
    if e < r - 1:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([e + 1], np.int64)),
                                    g.const(np.asarray([r], np.int64))]))
    return g.op("Reshape", [g.tensor(x), g.op("Concat", parts, axis=0)])


@exports("unflatten")
def _unflatten(g, node, x, dim, sizes):
    r = _rank(x)
    dim %= r
    shape = g.op("Shape", [g.tensor(x)])
    parts = []
    if dim > 0:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([0], np.int64)),
                                    g.const(np.asarray([dim], np.int64))]))
    parts.append(g.ints(list(sizes)))
    if dim < r - 1:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([dim + 1], np.int64)),
                                    g.const(np.asarray([r], np.int64))]))
    return g.op("Reshape", [g.tensor(x), g.op("Concat", parts, axis=0)])


def _trilu(upper):
    def f(g, node, x, k=0):
        if g.opset < 14:
            raise UnsupportedOnnxExport(f"{node.op} (ONNX has Trilu from opset 14)")
        return g.op("Trilu", [g.tensor(x), g.const(np.asarray(int(k), np.int64), "k")],
                    upper=upper)
    return f


exports(diagonals.Tril)(_trilu(0))
exports(diagonals.Triu)(_trilu(1))


@exports(shape.Permute)
def _permute(g, node, x, dims):
    if not dims:  # a 0-d tensor (ONNX cannot write an empty perm attribute)
        return g.op("Identity", [g.tensor(x)])
    return g.op("Transpose", [g.tensor(x)], perm=[d % _rank(x) for d in dims])


@exports(shape.Transpose)
def _transpose(g, node, x, d0, d1):
    perm = list(range(_rank(x)))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return g.op("Transpose", [g.tensor(x)], perm=perm)


@exports(shape.Unsqueeze)
def _unsqueeze(g, node, x, dim):
    return g.op("Unsqueeze", [g.tensor(x), _axes(g, [dim])])


@exports(shape.Squeeze)
def _squeeze(g, node, x, dims=None):
    if dims is None:
        return g.op("Squeeze", [g.tensor(x)])
    dims = [dims] if isinstance(dims, int) else list(dims)
    dims = [d for d in dims if x.value.shape[d] == 1]
    if not dims:
        return g.op("Identity", [g.tensor(x)])
    return g.op("Squeeze", [g.tensor(x), _axes(g, dims)])


@exports(join.Cat)
def _cat(g, node, *tensors, dim=0, np_dtype=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    out_dt = np.dtype(node.outputs[0].dtype.np)
    r = len(node.outputs[0].shape)
    # legacy 1-D empty tensors are skipped by cat; the inputs take the promoted dtype
    tensors = [t for t in tensors if not (r > 1 and isinstance(t, Ref) and
                                          tuple(t.value.shape) == (0,))]
    return g.op("Concat", [_cast_to(g, g.tensor(t), out_dt, t) for t in tensors], axis=dim)


@exports(join.Stack)
def _stack(g, node, *tensors, dim=0, np_dtype=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    axes = _axes(g, [dim])
    out_dt = np.dtype(node.outputs[0].dtype.np)
    return g.op("Concat", [g.op("Unsqueeze", [_cast_to(g, g.tensor(t), out_dt, t), axes])
                           for t in tensors], axis=dim)


@exports(join.Unbind)
def _unbind(g, node, x, dim=0):
    n = x.value.shape[dim]
    parts = g.op("Split", [g.tensor(x), g.const(np.ones(n, np.int64))], n_outputs=n,
                 axis=dim) if n > 1 else [g.tensor(x)]
    axes = _axes(g, [dim])
    return [g.op("Squeeze", [p, axes]) for p in parts]


@exports(join.SplitWithSizes)
def _split(g, node, x, sizes, dim=0):
    n = len(node.outputs)
    if not isinstance(sizes, (tuple, list)):  # one piece size (maybe a traced int)
        sizes = [o.shape[dim] for o in node.outputs]
    # Split even for one piece: onnxruntime checks the sizes against the length
    return g.op("Split", [g.tensor(x), g.const(np.asarray(list(sizes), np.int64))],
                n_outputs=n, axis=dim)


@exports(join.Repeat)
def _repeat(g, node, x, reps):
    reps = list(reps)
    r = _rank(x)
    t = g.tensor(x)
    if len(reps) > r:  # leading size-1 dims (Unsqueeze keeps a dynamic size dynamic)
        t = g.op("Unsqueeze", [t, _axes(g, list(range(len(reps) - r)))])
    return g.op("Tile", [t, g.ints(reps)])


@exports(shape.Flip, scan.Flip)
def _flip(g, node, x, axis):
    axes = [axis] if isinstance(axis, int) else list(axis)
    n = len(axes)
    big = np.iinfo(np.int64)
    return g.op("Slice", [g.tensor(x), g.const(np.full(n, -1, np.int64)),
                          g.const(np.full(n, big.min, np.int64)), _axes(g, axes),
                          g.const(np.full(n, -1, np.int64))])


@exports(shape.ConstantPad)
def _constant_pad(g, node, x, pads, value=0.0):
    r = _rank(x)
    begin, end = [0] * r, [0] * r
    for i in range(len(pads) // 2):
        d = r - 1 - i
        begin[d], end[d] = pads[2 * i], pads[2 * i + 1]
    return g.op("Pad", [g.tensor(x), g.const(np.asarray(begin + end, np.int64)),
                        g.tensor(value, like=x)], mode="constant")


@exports(gather_scatter.Gather)
def _gather(g, node, x, idx, dim):
    return g.op("GatherElements", [g.tensor(x), g.tensor(idx)], axis=dim)


@exports(sorting.Picked)
def _picked(g, node, x, idx, dim, keepdim=True):
    """A sort's values: the input read at the indices along ``dim``."""
    i = g.tensor(idx)
    if not keepdim:
        i = g.op("Unsqueeze", [i, _axes(g, [dim])])
    out = g.op("GatherElements", [g.tensor(x), i], axis=dim)
    return out if keepdim else g.op("Squeeze", [out, _axes(g, [dim])])


@exports(index_along.IndexSelect)
def _index_select(g, node, x, idx, dim):
    return g.op("Gather", [g.tensor(x), g.tensor(idx)], axis=dim)


@exports("embedding")
def _embedding(g, node, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise UnsupportedOnnxExport("embedding with max_norm (it renormalizes the weight)")
    return g.op("Gather", [g.tensor(weight), g.tensor(input)], axis=0)


def _is_index_tensor(k):
    return isinstance(k, Ref) and k.value.type == "Tensor"


def _advanced_getitem(g, x, key):
    """``x[key]`` with several tensor (and int) indices, which NumPy broadcasts together:
    GatherND over the indexed dims moved to the front, then the indexed block put where
    NumPy puts it (in place if the indices are adjacent, else first)."""
    if any(k is None or k is Ellipsis or isinstance(k, bool) for k in key):
        raise UnsupportedOnnxExport("indexing with several tensors together with None, "
                                    "... or a bool")
    r = _rank(x)
    cur = g.tensor(x)
    adv = []
    big = np.iinfo(np.int64).max
    for d, k in enumerate(key):
        if isinstance(k, slice):
            if not (k.start is None and k.stop is None and k.step in (None, 1)):
                cur = g.op("Slice", [cur, g.ints([0 if k.start is None else k.start]),
                                     g.ints([big if k.stop is None else k.stop]),
                                     _axes(g, [d]), g.ints([1 if k.step is None else k.step])])
        elif _is_index_tensor(k):
            if k.value.dtype is not None and k.value.dtype.name == "bool":
                raise UnsupportedOnnxExport("indexing with a boolean mask")
            adv.append((d, g.op("Cast", [g.tensor(k)], to=7), len(k.value.shape)))
        else:
            adv.append((d, g.tensor(k, dtype=np.int64), 0))
    dims = [d for d, _, _ in adv]
    rest = [d for d in range(r) if d not in dims]
    if dims + rest != list(range(r)):
        cur = g.op("Transpose", [cur], perm=dims + rest)
    total = adv[0][1]
    for _, name, _ in adv[1:]:
        total = g.op("Add", [total, name])
    bshape = g.op("Shape", [total])
    axm1 = g.const(np.asarray([-1], np.int64), "axes_last")
    parts = [g.op("Unsqueeze", [g.op("Expand", [name, bshape]), axm1]) for _, name, _ in adv]
    idx = g.op("Concat", parts, axis=-1)
    out = g.op("GatherND", [cur, idx])
    nb = max(n for _, _, n in adv)
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    if adjacent and dims[0] > 0:
        pre = dims[0]
        n_out = nb + len(rest)
        perm = list(range(nb, nb + pre)) + list(range(nb)) + list(range(nb + pre, n_out))
        out = g.op("Transpose", [out], perm=perm)
    return out


@exports("getitem")
def _getitem(g, node, x, key):
    if not isinstance(key, tuple):
        key = (key,)
    if sum(1 for k in key if _is_index_tensor(k) or (
            isinstance(k, (int, Ref)) and not isinstance(k, bool))) > 1 and any(
            _is_index_tensor(k) for k in key):
        return _advanced_getitem(g, x, key)
    ndim = _rank(x)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis and
                 not isinstance(k, bool))
    cur = g.tensor(x)
    d = 0
    big = np.iinfo(np.int64).max
    for k in key:
        if k is Ellipsis:
            d += ndim - n_real
        elif k is None or isinstance(k, bool):
            # x[True] adds a dim of 1, x[False] one of 0
            cur = g.op("Unsqueeze", [cur, _axes(g, [d])])
            if k is False:
                cur = g.op("Slice", [cur, g.ints([0]), g.ints([0]), _axes(g, [d])])
            d += 1
        elif isinstance(k, slice):
            if not (k.start is None and k.stop is None and k.step in (None, 1)):
                start = [0] if k.start is None else [k.start]
                stop = [big] if k.stop is None else [k.stop]
                step = [1] if k.step is None else [k.step]
                cur = g.op("Slice", [cur, g.ints(start), g.ints(stop), _axes(g, [d]),
                                     g.ints(step)])
            d += 1
        elif isinstance(k, Ref) and k.value.type == "Tensor":
            if k.value.dtype is not None and k.value.dtype.name == "bool":
                raise UnsupportedOnnxExport("indexing with a boolean mask")
            cur = g.op("Gather", [cur, g.tensor(k)], axis=d)
            d += len(k.value.shape)
        elif isinstance(k, (int, Ref)):
            cur = g.op("Gather", [cur, g.tensor(k, dtype=np.int64)], axis=d)
        else:
            raise UnsupportedOnnxExport(f"indexing with {type(k).__name__}")
    return cur


# ---- creation ------------------------------------------------------------------------------

def _fill(g, node, sizes, value):
    dt = np.dtype(node.outputs[0].dtype.np)
    return g.op("ConstantOfShape", [g.ints(list(sizes))],
                value=g.onnx.numpy_helper.from_array(np.asarray([value], dt)))


@exports("zeros", "ones", "empty")
def _filled(g, node, *size, **kw):
    return _fill(g, node, _shape_list(size), 1 if node.op == "ones" else 0)


@exports("full")
def _full(g, node, size, fill_value, **kw):
    return _fill(g, node, _shape_list((size,)) if not isinstance(size, (tuple, list))
                 else list(size), fill_value)


# ----- calls recorded whole for a traced int (ember._graph.names.INT_ARG_CALLS) whose
# ints are inputs of an ONNX op (the others take them as attributes: refused by name)
@exports("new_zeros", "new_ones")
def _new_filled(g, node, x, *size, **kw):
    return _fill(g, node, _shape_list(size), 1 if node.op == "new_ones" else 0)


@exports("new_full")
def _new_full(g, node, x, size, fill_value, **kw):
    return _fill(g, node, list(size), fill_value)


@exports("repeat")
def _repeat_call(g, node, x, *sizes):
    return _repeat(g, node, x, _shape_list(sizes))


@exports("constant_pad_nd")
def _constant_pad_call(g, node, x, pad, value=0):
    r = _rank(x)
    begin, end = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        begin[r - 1 - i], end[r - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return g.op("Pad", [g.tensor(x), g.ints(begin + end), g.tensor(value, like=x)],
                mode="constant")


@exports("narrow")
def _narrow(g, node, x, dim, start, length):
    """ONNX ``Slice`` of ``length`` elements from ``start`` (traced sizes stay inputs)."""
    dim %= _rank(x)
    if isinstance(start, int) and start < 0:  # counted from the end of the (runtime) dim
        size = g.op("Gather", [g.op("Shape", [g.tensor(x)]), g.ints([dim])], axis=0)
        starts = g.op("Add", [size, g.ints([start])])
        return g.op("Slice", [g.tensor(x), starts, g.op("Add", [starts, g.ints([length])]),
                              g.ints([dim])])
    if isinstance(start, Ref) and start.value.type == "Tensor":
        # a 0-d tensor start (PyTorch's exporter feeds it to Slice too), wrapped into the
        # dim as eager wraps a negative start: Slice would count -2 + length from the end
        size = g.op("Gather", [g.op("Shape", [g.tensor(x)]), g.ints([dim])], axis=0)
        k = g.op("Reshape", [g.op("Cast", [g.tensor(start)],
                                  to=g.elem_type(np.dtype(np.int64))), g.ints([1])])
        starts = g.op("Mod", [k, size])
        return g.op("Slice", [g.tensor(x), starts, g.op("Add", [starts, g.ints([length])]),
                              g.ints([dim])])
    starts = g.ints([start])
    return g.op("Slice", [g.tensor(x), starts, g.op("Add", [starts, g.ints([length])]),
                          g.ints([dim])])


@exports("eye")
def _eye(g, node, n, m=None, **kw):
    """ONNX ``EyeLike`` of a zero matrix of the (traced) size."""
    dt = np.dtype(node.outputs[0].dtype.np)
    square = _fill(g, node, [n, n if m is None else m], 0)
    return g.op("EyeLike", [square], dtype=g.elem_type(dt))


@exports("zeros_like", "ones_like", "empty_like")
def _like(g, node, input, **kw):
    dt = np.dtype(node.outputs[0].dtype.np)
    return g.op("ConstantOfShape", [g.op("Shape", [g.tensor(input)])],
                value=g.onnx.numpy_helper.from_array(np.asarray(
                    [1 if node.op == "ones_like" else 0], dt)))


@exports("full_like")
def _full_like(g, node, input, fill_value, **kw):
    """``ConstantOfShape`` of the input's shape; a traced fill is expanded to it."""
    dt = np.dtype(node.outputs[0].dtype.np)
    shape = g.op("Shape", [g.tensor(input)])
    if isinstance(fill_value, Ref):
        return g.op("Expand", [g.op("Cast", [g.tensor(fill_value)], to=g.elem_type(dt)),
                               shape])
    return g.op("ConstantOfShape", [shape], value=g.onnx.numpy_helper.from_array(
        np.asarray([fill_value], dt)))


@exports("arange")
def _arange(g, node, *args, **kw):
    nums = [a for a in args]
    if len(nums) == 1:
        start, end, step = 0, nums[0], 1
    elif len(nums) == 2:
        start, end, step = nums[0], nums[1], 1
    else:
        start, end, step = nums[:3]
    dt = np.dtype(node.outputs[0].dtype.np)
    return g.op("Range", [g.tensor(start, dtype=dt) if not isinstance(start, Ref) else
                          g.op("Cast", [g.tensor(start)], to=g.elem_type(dt)),
                          g.tensor(end, dtype=dt) if not isinstance(end, Ref) else
                          g.op("Cast", [g.tensor(end)], to=g.elem_type(dt)),
                          g.tensor(step, dtype=dt)])
