"""Packing a block's large elements and putting their results back, sixteen float32 at a
time, for the float32 one-pass kernels of :mod:`ember.ops._erf_numba` and
:mod:`ember.ops._erfinv_numba` (the ``ember[fast]`` extra).

Those kernels compute a costly piece (erfc's ``|x| >= 0.5``, erfinv's ``|x| >= 0.75``)
only on the elements that need it: the elements are packed into a buffer, the piece
runs over the buffer (a loop that vectorizes), and its results go back to their places.
A scalar loop that lists them (``pos[n] = i; n += big``) takes about a nanosecond per
element, as much as the piece itself on the packed ones; LLVM's masked compress-store
and expand-load (``vcompressps``/``vexpandps`` on AVX-512; on other processors LLVM
spells them out element by element, the same values) take about a tenth of that.
numba does not emit them from a loop, so they are written here as LLVM IR: each call
handles the sixteen elements ``src[at:at + 16]`` of a C-contiguous float32 array, the
ones with ``abs(x) >= edge`` (NaN not) in order.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)
from llvmlite import ir as _ir
from numba.core import cgutils as _cgutils
from numba.core import types as _types
from numba.core.extending import intrinsic as _intrinsic

__all__ = ["pack16", "unpack16"]

_LANES = 16
_F32 = _ir.FloatType()
_V16 = _ir.VectorType(_F32, _LANES)
_I64 = _ir.IntType(64)


def _c_float32(ty):
    """Whether ``ty`` is a C-contiguous float32 array type (the IR indexes its data)."""
    return isinstance(ty, _types.Array) and ty.dtype == _types.float32 and ty.layout == "C"


def _element(context, builder, ty, array, index):
    """The address of ``array[index]`` (an int64 index into a C-contiguous array)."""
    return builder.gep(context.make_array(ty)(context, builder, array).data, [index])


def _group(context, builder, ty, array, index):
    """The sixteen float32 from ``array[index]`` as one vector, and their address."""
    ptr = builder.bitcast(_element(context, builder, ty, array, index), _V16.as_pointer())
    return builder.load(ptr, align=4), ptr


def _mask(builder, v, edge):
    """``abs(v) >= edge`` lane by lane (an ordered compare: NaN gives False)."""
    fabs = _cgutils.get_or_insert_function(
        builder.module, _ir.FunctionType(_V16, [_V16]), "llvm.fabs.v16f32")
    splat = _ir.Constant(_V16, _ir.Undefined)
    for lane in range(_LANES):
        splat = builder.insert_element(splat, edge, _ir.Constant(_ir.IntType(32), lane))
    return builder.fcmp_ordered(">=", builder.call(fabs, [v]), splat)


def _count(builder, mask):
    """How many lanes of ``mask`` are set."""
    bits = builder.zext(builder.bitcast(mask, _ir.IntType(_LANES)), _I64)
    ctpop = _cgutils.get_or_insert_function(
        builder.module, _ir.FunctionType(_I64, [_I64]), "llvm.ctpop.i64")
    return builder.call(ctpop, [bits])


@_intrinsic
def pack16(typingctx, src, at, dst, to, edge):
    """Stores the elements of ``src[at:at + 16]`` with ``abs(x) >= edge`` at ``dst[to:]``,
    in order, and returns how many (``dst`` needs 16 places from ``to`` whatever the
    count: none past the count is written)."""
    if not (_c_float32(src) and _c_float32(dst)):
        return None

    def codegen(context, builder, signature, args):
        v, _ = _group(context, builder, signature.args[0], args[0], args[1])
        mask = _mask(builder, v, args[4])
        out = _element(context, builder, signature.args[2], args[2], args[3])
        fn = _cgutils.get_or_insert_function(
            builder.module, _ir.FunctionType(_ir.VoidType(), [_V16, out.type, mask.type]),
            "llvm.masked.compressstore.v16f32")
        builder.call(fn, [v, out, mask])
        return _count(builder, mask)
    return _types.int64(src, _types.int64, dst, _types.int64, _types.float32), codegen


@_intrinsic
def unpack16(typingctx, src, at, packed, frm, out, edge):
    """The inverse of ``pack16``: the elements of ``out[at:at + 16]`` whose ``src`` has
    ``abs(x) >= edge`` take ``packed[frm:]``, in order (the others are kept); returns how
    many were taken."""
    if not (_c_float32(src) and _c_float32(packed) and _c_float32(out)):
        return None

    def codegen(context, builder, signature, args):
        v, _ = _group(context, builder, signature.args[0], args[0], args[1])
        mask = _mask(builder, v, args[5])
        keep, where = _group(context, builder, signature.args[4], args[4], args[1])
        taken = _element(context, builder, signature.args[2], args[2], args[3])
        fn = _cgutils.get_or_insert_function(
            builder.module, _ir.FunctionType(_V16, [taken.type, mask.type, _V16]),
            "llvm.masked.expandload.v16f32")
        builder.store(builder.call(fn, [taken, mask, keep]), where, align=4)
        return _count(builder, mask)
    return (_types.int64(src, _types.int64, packed, _types.int64, out, _types.float32),
            codegen)
