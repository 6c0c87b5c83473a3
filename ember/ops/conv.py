"""Convolutions: conv1d/2d/3d, their transposes, and im2col (unfold) / col2im (fold).

Three primitives close under differentiation. With ``B(x, w, y) = <y, conv(x, w)>``:

- :class:`Conv` ``y = conv(x, w)`` (+ bias),
- :class:`ConvInput` ``x = conv_input(y, w)``, the adjoint of ``conv`` in ``x``
  (which is ``conv_transpose``),
- :class:`ConvWeight` ``w = conv_weight(x, y)``, the adjoint of ``conv`` in ``w``.

Each one's backward is written with the other two, so second derivatives (a
gradient penalty through a conv net) fall out. Forward is im2col: a strided
window view of the padded input, one copy into ``(N, C*K, O)`` columns, one
(batched) matmul that lands directly in (N, F, O) order. When the weight needs a
gradient, the node keeps those columns beside its saved tensors (freed with them) and
a first-order backward takes the weight gradient straight from them; second
derivatives, and graphs under saved-tensor hooks, rebuild them. ``conv_input`` picks its
path by shape (:func:`_input_path`: the stride-1 transposed convolution, span-layout
or batch-last columns, or col2im with one strided add per kernel position); the
timings behind each choice are in docs/performance/cnn.md. The array kernels (geometry,
im2col / col2im, the paths) are in :mod:`ember.ops._conv_kernels`.
"""

import numpy as np

from ember._tensor import Tensor, _mode_active
from ember.autograd import _modes, _saved_hooks
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive, _wrap
from ember.backend import gemm as _gemm
from ember.backend.dtypes import FROM_NP
from ember.ops import _batch, _batch_nn, _jvp

# the array kernels live in _conv_kernels; Geom and the kernels stay importable from here
# (pooling and _batch_nn import Geom from this module; ConvInput looks up _input_path here)
from ember.ops._conv_kernels import (  # noqa: F401
    _BLOCK_BYTES,
    _PER_SAMPLE_CK,
    Geom,
    _as_strided,
    _batch_blocks,
    _bias_shape,
    _col2im_last,
    _col2im_span,
    _conv_arrays,
    _crop,
    _depthwise,
    _dw_forward,
    _dw_input,
    _dw_weight,
    _flipped,
    _input_path,
    _kernel_slices,
    _prod,
    _Span,
    _stride1,
    _transposed,
    _weight_arrays,
    col2im,
    im2col,
    im2col_rows,
    pad_array,
    windows,
)
from ember.ops._util import (
    cj,
    int_args,
    not_implemented_for,
    opmath,
    reduced_float,
    traced_ints,
)
from ember.ops.composite_node import CompositeNode

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]


class Conv(Primitive):
    """``y = conv(x, w) + b``: x (N, C, *S), w (F, C/G, *K), b (F,) or None."""
    save_inputs = (0, 1)
    n_inputs = 3   # input, weight, bias (None when there is none), as PyTorch lists them
    _node_name = "ConvolutionBackward0"
    batch = _batch_nn.conv

    def forward(self, x, w, b, g):
        g = self.g = g.at(x.shape[2:])
        if reduced_float(x.dtype):
            # float16/bfloat16 summed in float32 and rounded once, as PyTorch's CPU kernel
            # (no columns kept: the weight's gradient is computed in the input's dtype)
            self._cols = None
            x32, w32, b32 = (None if a is None else a.astype(np.float32) for a in (x, w, b))
            return _conv_arrays(x32, w32, g, bias=b32).astype(x.dtype)
        if _grad_state.grad_enabled:
            # a graph may be recorded: the columns are handed on (``_record``, ``vjp``)
            # in a box that whoever uses them empties, so that nothing holding this op
            # object (a compiled plan's step) keeps them alive
            out, cols = _conv_arrays(x, w, g, keep=True, bias=b)
            self._cols = None if cols is None else [cols]
        else:
            out = _conv_arrays(x, w, g, bias=b)
        return out

    def _record(self, args, out):
        # The forward's columns are kept beside the saved inputs (so they are freed
        # with them) when the weight's gradient will read them. Not under saved-tensor
        # hooks: those decide what backward holds on to (checkpointing, offloading).
        t = Primitive._record(self, args, out)
        cols = _take_cols(self)
        if cols is not None and self._edges[1] is not None and not _saved_hooks.stack \
                and type(self._saved) is list:
            self._saved.append((cols, None))
        return t

    def backward(self, gy):
        saved = self.saved_tensors
        x, w = saved[0], saved[1]
        e = self._edges
        g = self.g
        # complex: each input's gradient reads the other input's conjugate (PyTorch's
        # convention, grad * conj(dy/dx)); the kept columns hold x's own values
        complex_ = x._data.dtype.kind == "c" or w._data.dtype.kind == "c"
        gx = ConvInput.apply(gy, cj(w), None, g) if e[0] is not None else None
        gw = None
        if e[1] is not None:
            if complex_:
                gw = ConvWeight.apply(cj(x), gy, g)
            elif len(saved) > 2 and not _grad_state.grad_enabled and not _modes.active[0]:
                # a first derivative, nothing recorded: the product over the kept columns
                gw = _wrap(_weight_arrays(x._data, gy._data, g, saved[2]))
            else:
                gw = ConvWeight.apply(x, gy, g)
        gb = gy.sum((0,) + tuple(range(2, 2 + g.nd))) if e[2] is not None else None
        return gx, gw, gb, None

    def jvp(self, tx, tw, tb, _):
        return _conv_jvp(self, tx, tw, tb)

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``): the adjoint convolutions' forwards."""
        x, w = inputs[0], inputs[1]
        e, g, gy = self._edges, self.g, grads[0]
        cols = _take_cols(self)
        if x.dtype.kind == "c" or w.dtype.kind == "c":  # (see ``backward``)
            x, w, cols = np.conj(x), np.conj(w), None
        gx = object.__new__(ConvInput).forward(gy, w, None, g) if e[0] is not None else None
        gw = _weight_arrays(x, gy, g, cols) if e[1] is not None else None
        gb = gy.sum((0,) + tuple(range(2, 2 + g.nd))) if e[2] is not None else None
        return [gx, gw, gb, None]


def _take_cols(op):
    """The columns a :class:`Conv` forward left on ``op`` (None if none), taken out of
    their box so that they live on only where the caller puts them."""
    box = op.__dict__.pop("_cols", None)
    return box.pop() if box else None


class ConvInput(Primitive):
    """``x = conv_input(y, w) + b``: the adjoint of ``conv`` in its input (conv_transpose).

    y (N, F, *O), w (F, C/G, *K), b (C,) or None; the result is (N, C, *S). The path
    (:func:`_input_path`): a convolution of the padded ``y`` with the flipped weight,
    the span-layout columns of :func:`_col2im_span`, or columns added back with
    :func:`col2im`.
    """
    save_inputs = (0, 1)
    _node_name = "ConvolutionBackward0"
    n_inputs = 3   # input, weight, bias (None when there is none), as PyTorch lists them
    batch = _batch_nn.conv_input

    @opmath  # (float16/bfloat16 summed in float32 and rounded once, as PyTorch's kernel)
    def forward(self, y, w, b, g):
        g = self.g = g.at_transposed(y.shape[2:])
        G = g.G
        n, f = y.shape[:2]
        cg = w.shape[1]
        kp = _prod(g.K)
        o = _prod(g.O)
        wm = w.reshape(G, f // G, cg * kp)
        path = _input_path(g, n, f // G, cg) if not _depthwise(g, cg) else "depthwise"
        if path == "depthwise":
            out = _dw_input(y, w, g)
        elif path == "transposed":
            yp, gt = _transposed(y, g)
            out = _conv_arrays(yp, _flipped(w, G), gt)
        elif path == "span":
            out = _col2im_span(y, w, g)
        elif path == "last":
            out = _col2im_last(y, w, g)
        else:
            if G == 1:
                col = _gemm.matmul(wm[0].T, y.reshape(n, f, o))  # N, C*K, O
            else:
                col = _gemm.matmul(wm.transpose(0, 2, 1),
                                   y.reshape(n, G, f // G, o))  # N, G, Cg*K, O
            col = col.reshape((n, cg * G) + tuple(g.K) + tuple(g.O))
            out = col.reshape((n, cg * G) + tuple(g.S)) if path == "gemm" else col2im(col, g)
        if b is not None:
            out += _bias_shape(b, g.nd)
        # (the column paths sum float16/bfloat16 in float32: one rounding to the dtype)
        return out if out.dtype == y.dtype else out.astype(y.dtype)

    def backward(self, gx):
        y, w = self.saved_tensors
        e = self._edges
        g = self.g
        gy = Conv.apply(gx, cj(w), None, g) if e[0] is not None else None
        gw = ConvWeight.apply(gx, cj(y), g) if e[1] is not None else None
        gb = gx.sum((0,) + tuple(range(2, 2 + g.nd))) if e[2] is not None else None
        return gy, gw, gb, None

    def jvp(self, ty, tw, tb, _):
        return _conv_jvp(self, ty, tw, tb)


class ConvWeight(Primitive):
    """``w = conv_weight(x, y)``: the adjoint of ``conv`` in its weight.

    x (N, C, *S), y (N, F, *O); the result is (F, C/G, *K).
    """
    save_inputs = (0, 1)
    _node_name = "ConvolutionBackward0"

    def forward(self, x, y, g):
        self.g = g
        return _weight_arrays(x, y, g)

    def backward(self, gw):
        x, y = self.saved_tensors
        e = self._edges
        g = self.g
        gx = ConvInput.apply(cj(y), gw, None, g) if e[0] is not None else None
        gy = Conv.apply(cj(x), gw, None, g) if e[1] is not None else None
        return gx, gy, None

    jvp = _jvp.multilinear(0, 1)


def _fold_batch(cls, lvl, args, params):
    """vmap of im2col / col2im: an unbatched sample takes the vmap batch as its N;
    batched samples have it joined to their N."""
    b = _batch._b()
    v, batched = b.unwrap(args[0], lvl)
    if batched and v.dim() - 1 == _unbatched_ndim(cls, args[1]):
        if any(b.unwrap(a, lvl)[1] for a in args[1:]):
            raise b.NoRule(f"{cls._op_name} with a batched argument other than its input")
        return b.wrap(cls.apply(v, *args[1:], **params), lvl)
    return _batch.fold_into_n(cls, lvl, args, params)


def _unbatched_ndim(cls, g):
    """The rank of an unbatched input of im2col (C, *S) or col2im (C*prod(K), L)."""
    return len(g.K) + 1 if cls is Unfold else 2


class Unfold(Primitive):
    """im2col: (N, C, *S) -> (N, C*prod(K), L), L the number of windows; an unbatched
    (C, *S) gives (C*prod(K), L) (one node, as PyTorch's)."""
    _node_name = "Im2ColBackward0"

    def forward(self, x, g):
        self.unbatched = x.ndim == len(g.K) + 1
        if self.unbatched:
            x = x[None]
        g = self.g = g.at(x.shape[2:])
        out = im2col(x, g)
        return out[0] if self.unbatched else out

    def backward(self, gy):
        return Fold.apply(gy, self.g), None

    jvp = _jvp.linear(0)
    batch = _fold_batch


class Fold(Primitive):
    """col2im: (N, C*prod(K), L) -> (N, C, *S), overlapping values summed; an unbatched
    (C*prod(K), L) gives (C, *S)."""
    _node_name = "Col2ImBackward0"

    def forward(self, col, g):
        self.g = g
        unbatched = col.ndim == 2
        if unbatched:
            col = col[None]
        n, ck = col.shape[:2]
        c = ck // _prod(g.K)
        out = col2im(col.reshape((n, c) + tuple(g.K) + tuple(g.O)), g)
        return out[0] if unbatched else out

    def backward(self, gx):
        return Unfold.apply(gx, self.g), None

    jvp = _jvp.linear(0)
    batch = _fold_batch


# ----- argument checks and the public functions ---------------------------------------

def ntuple(v, n, name, op="convolution"):
    """``v`` as an n-tuple of ints (an int is repeated), with PyTorch's error."""
    v = int_args(v)  # (0-d integer tensors, as torch takes them)
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(i) for i in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the {op} dimensions, but got {name}={list(v)}")
    return v


def _dtype_name(a):
    return FROM_NP[a.dtype].name


def _check_common(name, x, w, b, nd):
    if not isinstance(x, Tensor) or not isinstance(w, Tensor):
        raise TypeError(f"{name}() argument 'input' and 'weight' must be Tensors, got "
                        f"{type(x).__name__} and {type(w).__name__}")
    if x.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{name}, but got input of size: {list(x.shape)}")
    if w.dim() != nd + 2:
        raise RuntimeError(f"{name}: expected weight to have {nd + 2} dimensions, but got "
                           f"weight of size {list(w.shape)}")
    if x._data.dtype != w._data.dtype or (b is not None and b._data.dtype != x._data.dtype):
        other = w if x._data.dtype != w._data.dtype else b
        raise RuntimeError(f"expected scalar type {_dtype_name(x._data).capitalize()} but found "
                           f"{_dtype_name(other._data).capitalize()}")


def _refuse_kernel_dtype(nd, transposed, x, g):
    """PyTorch's error where the CPU kernel it picks for this geometry has no loop for the
    input's dtype: bool never (and no integer type but int64 for the dilated and the
    transposed kernels). An empty input runs no kernel, so nothing is refused."""
    dt = x._data.dtype
    if not x._data.size or dt.kind not in "biu" or (dt.kind != "b" and dt == np.int64):
        return
    if transposed:
        kernel = f"slow_conv_transpose{3 if nd == 3 else 2}d_out_cpu"
    elif any(d != 1 for d in g.d):
        kernel = "slow_conv_dilated<>"
    elif dt.kind != "b":
        return  # (the plain kernels have integer loops)
    elif nd < 3:
        kernel = "slow_conv2d_cpu"  # (conv1d runs as a 2-D convolution)
    else:
        # (a pointwise 3-D convolution is one matrix product: no columns to build)
        pointwise = g.G == 1 and all(v == 1 for v in g.K + g.s) and not any(g.lo + g.hi)
        kernel = "slow_conv3d_cpu" if pointwise else "compute_columns3d"
    raise not_implemented_for(kernel, dt)


def _check_bias(w, b, nout):
    if b is not None and (b.dim() != 1 or b.shape[0] != nout):
        raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be "
                           f"1-dimensional with {nout} elements, but got bias of size "
                           f"{list(b.shape)} instead")


def _check_sd(stride, dilation, groups):
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")


def _conv(name, nd, input, weight, bias, stride, padding, dilation, groups):
    _check_common(name, input, weight, bias, nd)
    batched = input.dim() == nd + 2
    x = input if batched else input.unsqueeze(0)
    stride = ntuple(stride, nd, "stride")
    dilation = ntuple(dilation, nd, "dilation")
    groups = int(groups)
    _check_sd(stride, dilation, groups)
    K = tuple(weight.shape[2:])
    S = tuple(x.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            tot = [d * (k - 1) for d, k in zip(dilation, K)]
            lo = tuple(t // 2 for t in tot)
            hi = tuple(t - t // 2 for t in tot)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        lo = hi = ntuple(padding, nd, "padding")
        if any(p < 0 for p in lo):
            raise RuntimeError("negative padding is not supported")
    f, cg = weight.shape[:2]
    c = x.shape[1]
    if c != cg * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {cg * groups} channels, "
                           f"but got {c} channels instead")
    if f % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(weight.shape)} "
                           f"instead")
    _check_bias(weight, bias, f)
    padded = tuple(a + p + q for a, p, q in zip(S, lo, hi))
    ext = tuple(d * (k - 1) + 1 for d, k in zip(dilation, K))
    if any(p < e for p, e in zip(padded, ext)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, ext))}). Kernel size can't be greater than "
            f"actual input size")
    if 0 in S and x.shape[0] and c:  # torch's kernels take only an empty batch or channels
        shown = list(x.shape[:2]) + [1] * (nd == 1) + list(S)  # conv1d runs as 2-D there
        raise RuntimeError("Only zero batch or zero channel inputs are supported, but got "
                           f"input shape: {shown}")
    O = tuple((p - e) // s + 1 for p, e, s in zip(padded, ext, stride))
    if lo != hi:
        # 'same' with an odd total padding: PyTorch pads the input by the difference on
        # the high side (a ConstantPadNd node) and convolves with the low side's padding
        from ember.ops.padding import constant_pad_nd
        pads = []
        for i in reversed(range(nd)):
            pads += [0, hi[i] - lo[i]]
        x = constant_pad_nd(x, pads, 0)
        S, hi = tuple(x.shape[2:]), lo
    g = Geom(S, O, K, stride, dilation, lo, hi, groups)
    _refuse_kernel_dtype(nd, False, x, g)
    out = Conv.apply(x, weight, bias, g)
    return out if batched else out.squeeze(0)


def _conv_transpose(name, nd, input, weight, bias, stride, padding, output_padding, groups,
                    dilation):
    _check_common(name, input, weight, bias, nd)
    batched = input.dim() == nd + 2
    y = input if batched else input.unsqueeze(0)
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    stride = ntuple(stride, nd, "stride")
    dilation = ntuple(dilation, nd, "dilation")
    padding = ntuple(padding, nd, "padding")
    output_padding = ntuple(output_padding, nd, "output_padding")
    groups = int(groups)
    _check_sd(stride, dilation, groups)
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        dims = ("height", "width") if nd == 2 else ("depth", "height", "width")[3 - nd:]
        parts = " ".join(f"output_padding_{n}: {v}" for n, v in zip(dims, output_padding))
        parts += " " + " ".join(f"stride_{n}: {v}" for n, v in zip(dims, stride))
        parts += " " + " ".join(f"dilation_{n}: {v}" for n, v in zip(dims, dilation))
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, "
                           f"but got {parts}")
    cin, cg = weight.shape[:2]
    if y.shape[1] != cin:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(y.shape)} to have {cin} channels, but got "
                           f"{y.shape[1]} channels instead")
    if cin % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(weight.shape)} "
                           f"instead")
    _check_bias(weight, bias, cg * groups)
    K = tuple(weight.shape[2:])
    O = tuple(y.shape[2:])
    S = tuple((o - 1) * s - 2 * p + d * (k - 1) + op + 1
              for o, s, p, d, k, op in zip(O, stride, padding, dilation, K, output_padding))
    if any(v <= 0 for v in S):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, O))}). "
                           f"Calculated output size per channel: ({' x '.join(map(str, S))}). "
                           f"Output size is too small")
    g = Geom(S, O, K, stride, dilation, padding, padding, groups)
    _refuse_kernel_dtype(nd, True, y, g)
    out = ConvInput.apply(y, weight, bias, g)
    return out if batched else out.squeeze(0)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) of ``input`` (N, C, L) with ``weight``
    (out_channels, C/groups, kL); ``padding`` may be an int, a tuple, 'valid' or 'same'.

    >>> conv1d(ember.randn(2, 3, 10), ember.randn(4, 3, 3)).shape
    ember.Size([2, 4, 8])
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of ``input`` (N, C, H, W) with ``weight``
    (out_channels, C/groups, kH, kW); ``padding`` may be an int, a tuple, 'valid' or 'same'.

    >>> conv2d(ember.randn(1, 3, 8, 8), ember.randn(4, 3, 3, 3), padding=1).shape
    ember.Size([1, 4, 8, 8])
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of ``input`` (N, C, D, H, W) with ``weight``
    (out_channels, C/groups, kD, kH, kW)."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution ("deconvolution"): the gradient of ``conv1d`` with
    respect to its input. ``weight`` is (in_channels, out_channels/groups, kL)."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution: the gradient of ``conv2d`` with respect to its input.
    ``weight`` is (in_channels, out_channels/groups, kH, kW); the output size is
    ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    >>> conv_transpose2d(ember.randn(1, 4, 5, 5), ember.randn(4, 2, 3, 3), stride=2).shape
    ember.Size([1, 2, 11, 11])
    """
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution; ``weight`` is (in_channels, out_channels/groups, kD, kH, kW)."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


# ----- conv_tbc: PyTorch's one node over a composite ------------------------------------
def _conv_tbc(input, weight, bias, pad):
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


class ConvTbc(CompositeNode):
    """``conv_tbc``: PyTorch's one node over (input, weight, bias); ember's
    convolution of the permuted operands underneath (``torch.conv_tbc`` is
    :func:`ember.nn.functional.conv_tbc`)."""
    save_inputs = (0, 1, 2)
    n_inputs = 3
    composite = staticmethod(_conv_tbc)


def refuse_tensor_sizes(*sizes):
    """torch's Python wrappers of ``unfold``, ``fold`` and ``max_unpool`` make tuples of
    their sizes by iterating them (``_pair``): a 0-d tensor there is refused with the
    iteration's TypeError, where the other ops read it as the int (``ntuple``)."""
    for v in sizes:
        if isinstance(v, Tensor) and v._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")


def _fold_args(name, kernel_size, dilation, padding, stride):
    refuse_tensor_sizes(kernel_size, dilation, padding, stride)
    k = ntuple(kernel_size, 2, "kernel_size", name)
    d = ntuple(dilation, 2, "dilation", name)
    p = ntuple(padding, 2, "padding", name)
    s = ntuple(stride, 2, "stride", name)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: "
                           f"{k[0]} kernel_width: {k[1]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: "
                           f"{s[0]} stride_width: {s[1]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: "
                           f"{d[0]} dilation_width: {d[1]}")
    if any(v < 0 for v in p):
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} "
                           f"pad_width: {p[1]}")
    return k, d, p, s


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks (im2col): (N, C, H, W) -> (N, C*kH*kW, L), where L is
    the number of block positions; each column is one flattened block.

    >>> unfold(ember.randn(1, 2, 4, 4), 2).shape
    ember.Size([1, 8, 9])
    """
    if _mode_active[0] and (r := traced_ints(kernel_size, dilation, padding, stride)) is not None:
        # a traced window, dilation, padding or stride: the blocks' geometry is computed
        # in Python, so the call is one node
        return r[0].composite("im2col", unfold, (input,) + r[1], {})
    k, d, p, s = _fold_args("unfold", kernel_size, dilation, padding, stride)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    S = tuple(input.shape[-2:])
    O = tuple((a + 2 * pi - di * (ki - 1) - 1) // si + 1
              for a, pi, di, ki, si in zip(S, p, d, k, s))
    if any(o < 1 for o in O):
        raise RuntimeError(f"Given input with spatial size ({S[0]}, {S[1]}), kernel_size=({k[0]}"
                           f", {k[1]}), dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
                           f"calculated shape of the array of sliding blocks as ({O[0]}, "
                           f"{O[1]}), but its components must be at least one.")
    return Unfold.apply(input, Geom(S, O, k, s, d, p, p, 1))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding local blocks into a tensor (col2im), summing overlaps:
    (N, C*kH*kW, L) -> (N, C, *output_size). The adjoint of :func:`unfold`."""
    S = ntuple(output_size, 2, "output_size", "fold")
    k, d, p, s = _fold_args("fold", kernel_size, dilation, padding, stride)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    x = input if input.dim() == 3 else input.unsqueeze(0)
    kk = k[0] * k[1]
    if x.shape[1] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={x.shape[1]} and "
                           f"kernel_size=({k[0]}, {k[1]})")
    O = tuple((a + 2 * pi - di * (ki - 1) - 1) // si + 1
              for a, pi, di, ki, si in zip(S, p, d, k, s))
    if x.shape[2] != O[0] * O[1] or any(o < 1 for o in O):
        raise RuntimeError(f"Given output_size=({S[0]}, {S[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=("
                           f"{s[0]}, {s[1]}), expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {O[0]} * {O[1]} = "
                           f"{O[0] * O[1]}, but got input.size(2)={x.shape[2]}.")
    return Fold.apply(input, Geom(S, O, k, s, d, p, p, 1))


def _conv_jvp(self, tx, tw, tb):
    """Tangent of ``conv(x, w) + b`` (also for the transposed conv): linear in each."""
    x, w, _, g = self.fw_inputs
    cls = type(self)
    out = None if tx is None else cls.apply(tx, w, None, g)
    if tw is not None:
        r = cls.apply(x, tw, None, g)
        out = r if out is None else out + r
    if tb is not None:
        r = tb.reshape((-1,) + (1,) * g.nd)
        out = r if out is None else out + r
    return out
