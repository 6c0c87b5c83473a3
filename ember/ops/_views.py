"""Views: outputs that share memory (and the version counter) with their input.

Also the rebase done when a view is changed in place while a graph is recorded:
the view's region of the base is expressed as ``as_strided`` of the base, and the
base gets a node that scatters the new values into it (PyTorch's CopySlices).
"""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive


class ViewPrimitive(Primitive):
    """A primitive whose outputs are views of its first input."""

    @classmethod
    def apply(cls, x, *args, **params):
        out = Primitive.apply.__func__(cls, x, *args, **params)
        base = x if x._base is None else x._base
        if type(out) is tuple:
            for o in out:
                o._base = base
                o._vc = x._vc
        else:
            out._base = base
            out._vc = x._vc
        return out


def _geometry(view_arr, base_arr):
    """(shape, strides in elements, offset in elements) of a view inside its base."""
    isz = base_arr.itemsize
    if type(base_arr) is np.ndarray:
        off = view_arr.__array_interface__["data"][0] - base_arr.__array_interface__["data"][0]
    else:
        off = view_arr.data.ptr - base_arr.data.ptr
    return view_arr.shape, tuple(s // isz for s in view_arr.strides), off // isz


def _strided(arr, shape, strides, offset):
    """The view of contiguous ``arr`` given by shape/strides/offset (in elements)."""
    isz = arr.itemsize
    flat = arr.reshape(-1)
    xp_strides = tuple(s * isz for s in strides)
    if type(arr) is np.ndarray:
        return np.lib.stride_tricks.as_strided(flat[offset:], shape, xp_strides)
    import cupy
    return cupy.lib.stride_tricks.as_strided(flat[offset:], shape, xp_strides)


class AsStrided(ViewPrimitive):
    """A strided window of a contiguous tensor."""

    def forward(self, x, shape, strides, offset):
        self.geom = (x.shape, shape, strides, offset)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        return _strided(x, shape, strides, offset)

    def backward(self, gy):
        base_shape, shape, strides, offset = self.geom
        return AsStridedScatter.apply(_zeros(gy, base_shape), gy, shape, strides, offset,
                                      True), None, None, None


class AsStridedScatter(Primitive):
    """``base`` with the strided window replaced by (or, accumulating, added to) ``src``."""

    def forward(self, base, src, shape, strides, offset, accumulate=False):
        self.geom = (shape, strides, offset)
        out = np.array(base, copy=True, order="C")
        if accumulate:
            # windows may overlap (expanded views): add element by element
            idx = _strided(np.arange(out.size).reshape(out.shape), shape, strides, offset)
            np.add.at(out.reshape(-1), idx.reshape(-1), np.broadcast_to(src, shape).reshape(-1))
        else:
            _strided(out, shape, strides, offset)[...] = src
        self.accumulate = accumulate
        return out

    def backward(self, gy):
        shape, strides, offset = self.geom
        g_src = AsStrided.apply(gy.contiguous(), shape, strides, offset)
        if self.accumulate:
            return gy, g_src, None, None, None, None
        g_base = AsStridedScatter.apply(gy, _zeros(g_src, shape), shape, strides, offset)
        return g_base, g_src, None, None, None, None


def _zeros(like, shape):
    from ember.backend import array_module
    return _make(array_module(like._data).zeros(shape, like._data.dtype))


def rebase_view(view, result):
    """Write ``result`` into ``view`` in place and route gradients through its base."""
    base = view._base
    if not base._data.flags.c_contiguous:
        raise NotImplementedError(
            "in-place modification of a view whose base is not contiguous, while recording "
            "gradients, is not supported; call .contiguous() on the base first")
    geom = _geometry(view._data, base._data)
    old_base = _make(base._data, base._requires_grad)
    old_base.grad_fn = base.grad_fn
    old_base._output_nr = base._output_nr
    new_base = AsStridedScatter.apply(old_base, result, *geom)
    view._data[...] = result._data
    view._vc[0] += 1
    base.grad_fn = new_base.grad_fn
    base._output_nr = 0
    base._requires_grad = True
    new_view = AsStrided.apply(_make_alias(base), *geom)
    view.grad_fn = new_view.grad_fn
    view._output_nr = 0
    view._requires_grad = True


def _make_alias(t):
    a = _make(t._data, t._requires_grad)
    a.grad_fn = t.grad_fn
    a._output_nr = t._output_nr
    return a


def as_strided(input, size, stride, storage_offset=0):
    """A view with the given size and stride (in elements) over ``input``'s memory."""
    if input._base is None and input._data.flags.c_contiguous:
        return AsStrided.apply(input, tuple(size), tuple(stride), storage_offset)
    base = input if input._base is None else input._base
    _, _, off = _geometry(input._data, base._data)
    return AsStrided.apply(base, tuple(size), tuple(stride), storage_offset or off)


Tensor.as_strided = as_strided
