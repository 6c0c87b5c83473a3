"""The memory-overlap checks of ``out=``: torch's ``assert_no_internal_overlap``,
``assert_no_overlap`` and ``assert_no_partial_overlap`` (the in-place writes' own test is
``_inplace.overlaps_itself``)."""
import numpy as np

from ember._tensor import Tensor

_ndarray = np.ndarray


def _refuse_internal_overlap(arr):
    """torch's ``assert_no_internal_overlap`` of an ``out=`` array: an expanded dim (stride
    0) would have several results written to one element (the test of in-place writes,
    ``_inplace.overlaps_itself``)."""
    if 0 in arr.strides:
        from ember.ops._inplace import _OVERLAP_MESSAGE, overlaps_itself
        if overlaps_itself(arr):
            raise RuntimeError(_OVERLAP_MESSAGE)


def refuse_out_overlap(out, inputs):
    """torch's ``assert_no_overlap`` for the ops that read their inputs while writing
    ``out`` (gather, take, index_select, masked_select, cat, kthvalue): ``out`` (a tensor
    or a tuple of them) must share no memory with any tensor among ``inputs`` (lists
    of tensors are looked into), or the op would read what it has already written."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            continue
        _refuse_internal_overlap(o._data)  # before any resize, as torch
        for x in inputs:
            for t in (x if isinstance(x, (tuple, list)) else (x,)):
                if t is o or isinstance(t, Tensor) and t._data.size and o._data.size and \
                        np.may_share_memory(o._data, t._data):
                    raise RuntimeError(
                        "unsupported operation: some elements of the input tensor and the "
                        "written-to tensor refer to a single memory location. Please clone() "
                        "the tensor before performing the operation.")


# the functions whose out= torch refuses where it shares memory with an input in part (its
# elementwise kernels' ``assert_no_partial_overlap``: the result would depend on the order
# of the writes); out= the input itself they write in place. ember computes out of place,
# so it checks only to raise as torch does (tests/test_opinfo_overlap.py keeps the list)
APART_OUT = frozenset("""
    abs acos acosh add addbmm addcdiv addcmul addmm addmv addr angle asin asinh atan
    atan2 atanh baddbmm bitwise_and bitwise_left_shift bitwise_not bitwise_or
    bitwise_right_shift bitwise_xor ceil clamp clamp_max clamp_min conj_physical copysign
    cos cosh cross cumprod cumsum deg2rad digamma div erf erfc erfinv exp exp2 expm1
    floor floor_divide fmax fmin fmod frac frexp gcd gelu hardshrink heaviside hypot i0
    igamma igammac kron lcm ldexp lerp lgamma log log10 log1p log2 logaddexp logaddexp2
    logcumsumexp logit max maximum min minimum mode msort mul nan_to_num neg nextafter
    normalize outer polygamma pow rad2deg reciprocal remainder renorm round rsqrt scatter
    scatter_add scatter_reduce sgn sigmoid sign sin sinc sinh softplus softshrink sort sqrt
    square sub tan tanh topk true_divide trunc where xlogy
""".split())

# the in-place ops torch refuses where ``self`` shares memory in part with an input
# (``x[:-1].add_(x[1:])``: its kernels would read elements they have already written);
# ember computes out of place, so it checks only to raise as torch does
# (tests/test_opinfo_overlap.py's ``inplace_partial`` keeps the list)
# (torch's addmm_, addmv_, addr_ and addbmm_ take a self shared with a factor, as their
# out= does; its ldexp_ multiplies by a new tensor)
APART_INPLACE = APART_OUT - frozenset("addmm addmv addr addbmm ldexp".split()) | frozenset("""
    eq ge gt le lt ne logical_and logical_or logical_xor index_add index_copy
""".split())


def _dense_span(d):
    """The byte range ``[begin, end)`` of an array whose elements fill it once (torch's
    ``is_non_overlapping_and_dense``, in any order of dimensions), or None."""
    if d.flags.c_contiguous or d.flags.f_contiguous:
        begin = d.__array_interface__["data"][0]
        return begin, begin + d.nbytes
    expect = d.itemsize
    for st, n in sorted((st, n) for st, n in zip(d.strides, d.shape) if n != 1):
        if st != expect:
            return None
        expect *= n
    begin = d.__array_interface__["data"][0]
    return begin, begin + d.nbytes


def _owner(a):
    """The array (or buffer) at the bottom of ``a``'s chain of bases: arrays of different
    owners share no memory."""
    b = a.base
    while b is not None:
        a, b = b, getattr(b, "base", None)
    return a


def refuse_partial_overlap(out, inputs):
    """torch's ``assert_no_partial_overlap`` of ``out=`` (a tensor or a tuple of them) and
    the tensors among ``inputs``: memory shared in part is refused; the same memory with
    the same layout is written in place, as torch writes it. A layout torch cannot decide
    (not dense) passes, as in torch."""
    for o in (out if isinstance(out, (tuple, list)) else (out,)):
        od = o._data if isinstance(o, Tensor) else None
        if type(od) is not _ndarray:
            continue
        owner = od if od.base is None else _owner(od)
        for t in inputs:
            if not isinstance(t, Tensor) or t is o:
                continue
            td = t._data
            # (the common case, another tensor's memory, costs a test or two)
            if type(td) is not _ndarray or (td is not owner if td.base is None
                                             else _owner(td) is not owner):
                continue
            _refuse_pair(od, td)


def refuse_basic_write_overlap(arr, basic, value):
    """``x[basic] = value`` (a slice, no advanced index): torch's ``copy_`` into the view
    refuses a ``value`` sharing memory with it in part (``x[1:] = x[:-1]``)."""
    vd = value._data
    if type(vd) is not _ndarray or type(arr) is not _ndarray:
        return
    owner = arr if arr.base is None else _owner(arr)
    if vd is not owner if vd.base is None else _owner(vd) is not owner:
        return
    _refuse_pair(arr[basic], vd)


def _refuse_pair(od, td):
    span = _dense_span(od) if od.size else None
    other = _dense_span(td) if td.size else None
    if span is None or other is None or other[0] >= span[1] or span[0] >= other[1]:
        return
    if other == span and td.strides == od.strides:
        return
    raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                       "written-to tensor refer to a single memory location. Please clone() "
                       "the tensor before performing the operation.")
