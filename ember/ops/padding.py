"""Padding: ``constant_pad_nd`` and ``pad`` (``torch.nn.functional.pad``: constant, reflect,
replicate, circular). Re-exported by :mod:`ember.ops.shape`, where users import ``pad``."""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import traced_ints
from ember.ops.composite_node import CompositeNode, call, named_nodes

__all__ = ["constant_pad_nd"]


def _xp(a):
    return array_module(a)


class ConstantPad(Primitive):
    _node_name = "ConstantPadNdBackward0"

    def forward(self, x, pads, value):
        self.pads = pads
        nd = x.ndim
        shape = list(x.shape)
        src, dst = [slice(None)] * nd, [slice(None)] * nd
        for k in range(len(pads) // 2):
            d = nd - 1 - k
            lo, hi = pads[2 * k], pads[2 * k + 1]
            n = x.shape[d]
            new = n + lo + hi
            keep = n - max(-lo, 0) - max(-hi, 0)
            if new < 0 or keep < 0:
                raise RuntimeError(f"The input size {n}, plus negative padding {lo} and {hi} "
                                   f"resulted in a negative output size, which is invalid. "
                                   f"Check dimension {d} of your input.")
            shape[d] = new
            src[d] = slice(max(-lo, 0), max(-lo, 0) + keep)
            dst[d] = slice(max(lo, 0), max(lo, 0) + keep)
        out = _xp(x).full(shape, value, dtype=x.dtype)
        out[tuple(dst)] = x[tuple(src)]
        return out

    def backward(self, gy):
        return ConstantPad.apply(gy, tuple(-p for p in self.pads), 0), None, None

    jvp = _jvp.linear(0, 2)
    batch = _batch.passthrough


def constant_pad_nd(input, pad, value=0):
    """``input`` padded with ``value``; ``pad`` lists (before, after) pairs from the
    last dim backwards. Negative amounts crop."""
    if _mode_active[0] and (r := traced_ints(pad)) is not None:
        # traced amounts: the output's shape is computed in Python, so the call is one node
        return r[0].composite("constant_pad_nd", constant_pad_nd, (input, r[1][0], value), {})
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Length of pad must be even but instead it equals " + str(len(pad)))
    if len(pad) // 2 > input._data.ndim:
        raise RuntimeError(f"Length of pad should be no more than twice the number of dimensions "
                           f"of the input. Pad length is {len(pad)} while the input has "
                           f"{input._data.ndim} dimensions.")
    if isinstance(value, Tensor):
        if _mode_active[0]:
            # the fill becomes a Python number: a compiled graph would replay it
            from ember._graph.capture import branch_on_values
            branch_on_values(value, "constant_pad_nd's value")
        value = value.item()
    return ConstantPad.apply(input, pad, value)


_NP_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}



class _Pad(CompositeNode):
    """Reflection and replication padding: PyTorch's one node, named for the mode and
    the number of padded dims, over the input (ember gathers the padded positions one
    dim at a time underneath)."""
    save_inputs = (0,)
    flat_in = (0,)

    @staticmethod
    def composite(input, pad, mode):
        return _pad_gather(input, pad, mode)


_PAD_NODES = named_nodes(_Pad, {(m, n): f"{k}Pad{n}DBackward0"
                                for m, k in (("reflect", "Reflection"),
                                             ("replicate", "Replication"))
                                for n in (1, 2, 3)}, __name__)


def pad(input, pad, mode="constant", value=None):
    """Pad ``input`` (PyTorch's ``torch.nn.functional.pad``).

    ``pad`` lists (before, after) amounts from the last dim backwards:
    ``(1, 1)`` pads the last dim, ``(1, 1, 2, 2)`` the last two. ``mode`` is
    ``'constant'`` (with ``value``, any number of dims, negative amounts crop),
    ``'reflect'``, ``'replicate'`` or ``'circular'`` (the last 1 to 3 dims of a
    batched or unbatched input, as PyTorch allows).

        >>> pad(ember.ones(2, 3), (1, 1)).shape
        ember.Size([2, 5])
    """
    if _mode_active[0] and (r := traced_ints(pad)) is not None:
        # traced amounts (see constant_pad_nd)
        if mode == "constant":
            return r[0].composite("constant_pad_nd", constant_pad_nd,
                                  (input, r[1][0], 0 if value is None else value), {})
        if value is None or not isinstance(value, Tensor) and value == 0:
            return r[0].composite("pad", _pad_call, (input, tuple(r[1][0]), mode), {})
    pad = tuple(int(p) for p in pad)
    nd = input._data.ndim
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > nd:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{nd}")
    if mode == "constant":
        return constant_pad_nd(input, pad, 0 if value is None else value)
    if mode not in _NP_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node: the positions read depend on the input's size
        return m.composite("pad", _pad_call, (input, tuple(pad), mode), {})
    n = len(pad) // 2
    if n not in (1, 2, 3) or nd not in (n + 1, n + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {nd}D input tensor.\nSupported "
            "combinations for non-constant padding:\n  - 2D or 3D input: padding size = 2 (pads "
            "last dimension)\n  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    if mode != "circular":
        return call(_PAD_NODES[(mode, n)], input, pad, mode)
    return _pad_circular(input, pad)


def _check_pad(input, pad, mode):
    """PyTorch's errors for reflect/replicate/circular widths against the input's size."""
    nd = input._data.ndim
    n = len(pad) // 2
    # torch's kernels allow a 0 only in the batch dim (present when nd is n + 2)
    if mode in ("reflect", "replicate") and 0 in input.shape[1 if nd == n + 2 else 0:]:
        raise RuntimeError(f"Expected {n + 1}D or {n + 2}D (batch mode) tensor with "
                           f"possibly 0 batch size and other non-zero dimensions for input, "
                           f"but got: {list(input.shape)}")
    for k in range(n):
        d = nd - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        size = input._data.shape[d]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({lo}, {hi}) at dimension "
                               f"{d} of input {list(input.shape)}")
        if mode == "circular" and (lo > size or hi > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if size == 0:
            raise RuntimeError(f"Expected {nd - n}D or {nd - n + 1}D (batch mode) tensor with "
                               f"possibly 0 batch size and other non-zero dimensions for input, "
                               f"but got: {list(input.shape)}")
        if size + lo + hi < 0:
            raise RuntimeError(f"input size {size} with padding ({lo}, {hi}) gives a negative "
                               f"output size at dimension {d}")
        # circular: PyTorch crops first and wraps around what is left
        if mode == "circular" and max(lo, hi) > size - max(-lo, 0) - max(-hi, 0):
            raise RuntimeError("Padding value causes wrapping around more than once.")


def _pad_gather(input, pad, mode):
    from ember.ops.index_along import index_select
    _check_pad(input, pad, mode)
    nd = input._data.ndim
    x = input
    for k in range(len(pad) // 2):
        d = nd - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        size = x._data.shape[d]
        idx = np.pad(np.arange(size), (max(lo, 0), max(hi, 0)), mode=_NP_MODES[mode])
        idx = idx[max(-lo, 0):len(idx) - max(-hi, 0)]
        x = index_select(x, d, _make(_xp(x._data).asarray(idx, dtype=np.int64)))
    return x


def _narrow(t, d, start, stop):
    # narrow, not indexing: a slice over the whole dim is a slice node too, as PyTorch's
    return t.narrow(d, start, stop - start)


def _along(d, start, stop):
    return (slice(None),) * d + (slice(start, stop),)


def _pad_circular(input, pad):
    """Circular padding as PyTorch's composite writes it, so that the graph is its graph:
    the (cropped) input copied into the middle of a new tensor, then, dim by dim, the
    wrapped borders copied from that tensor's own slices (a corner is written once per
    dim it lies on, the last write from already wrapped values)."""
    _check_pad(input, pad, "circular")
    nd = input._data.ndim
    n = len(pad) // 2
    dims = [nd - 1 - k for k in range(n)]
    shape = list(input.shape)
    for k, d in enumerate(dims):
        shape[d] += pad[2 * k] + pad[2 * k + 1]
    out = input.new_empty(tuple(shape))
    # (each copy is written as ``out[region] = source``: one CopySlices over the source's
    # node, as PyTorch's copy_ into a slice records)
    region, src = [slice(None)] * nd, input
    for k in reversed(range(n)):   # from the first padded dim, as PyTorch
        d, lo, hi = dims[k], pad[2 * k], pad[2 * k + 1]
        region[d] = slice(max(lo, 0), shape[d] - max(hi, 0))
        src = _narrow(src, d, max(-lo, 0), input.shape[d] - max(-hi, 0))
    out[tuple(region)] = src
    for k in range(n):             # from the last dim
        d, lo, hi = dims[k], pad[2 * k], pad[2 * k + 1]
        if lo > 0:
            out[_along(d, 0, lo)] = _narrow(out, d, shape[d] - lo - max(hi, 0),
                                            shape[d] - max(hi, 0))
        if hi > 0:
            out[_along(d, shape[d] - hi, shape[d])] = _narrow(out, d, max(lo, 0),
                                                              max(lo, 0) + hi)
    return out


_pad_call = pad  # (``pad`` names the widths inside the function)
