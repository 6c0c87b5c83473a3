"""PyTorch's AVX2 float32 Box-Muller (``normal_fill_16_AVX2``), its float uniform and the
32-bit Mersenne Twister as numba kernels (the ``ember[fast]`` extra).

Imported lazily by :mod:`ember._random_kernels` the first time a float32 or half
``normal_`` or ``uniform_(a, b)`` of 4096 or more values runs (numba's import takes
about a second, so never at ``import ember``); without numba that import fails and the
NumPy replay in ``_random_kernels`` runs unchanged.

The kernels perform the NumPy replay's float32 operations in the same order, so their
values are that replay's (and PyTorch's) to the bit. The differences are only in how:
each of PyTorch's fused multiply-adds is LLVM's ``llvm.fma.f32`` (one rounding, done
by the FMA instruction where the CPU has one and by a correctly rounded library call
where it does not) instead of the float64 emulation NumPy needs; the float/int bit
reinterpretations of ``log256_ps``/``sincos256_ps`` are LLVM bit casts; and the uniforms
are made from the raw 32-bit outputs inside the kernels. Everything else is plain
float32 arithmetic, compiled without contraction, so no other multiply and add fuse.
:func:`mt19937_fill` continues NumPy's ``MT19937`` state word for word.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.extending import intrinsic

from ember.backend.numba_jit import njit as _jit

__all__ = ["box_muller16", "uniform24", "mt19937_fill"]

_F = np.float32
_ZERO, _ONE, _HALF, _MTWO = _F(0.0), _F(1.0), _F(0.5), _F(-2.0)
_U24 = _F(2.0 ** -24)
_LOW24 = np.uint64(0xFFFFFF)
_TWO_PI = _F(2 * np.pi)
_P0, _P1, _P2, _P3, _P4, _P5, _P6, _P7, _P8 = (
    _F(7.0376836292E-2), _F(-1.1514610310E-1), _F(1.1676998740E-1), _F(-1.2420140846E-1),
    _F(1.4249322787E-1), _F(-1.6668057665E-1), _F(2.0000714765E-1), _F(-2.4999993993E-1),
    _F(3.3333331174E-1))
_Q1, _Q2 = _F(-2.12194440e-4), _F(0.693359375)
_SQRTHF = _F(0.707106781186547524)
_DP1, _DP2, _DP3 = _F(-0.78515625), _F(-2.4187564849853515625e-4), _F(-3.77489497744594108e-8)
_S0, _S1, _S2 = _F(-1.9515295891E-4), _F(8.3321608736E-3), _F(-1.6666654611E-1)
_C0, _C1, _C2 = _F(2.443315711809948E-005), _F(-1.388731625493765E-003), _F(4.166664568298827E-002)
_FOPI = _F(1.27323954473516)




@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` for float32 operands, rounded once (IEEE fused multiply-add)."""
    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        f = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32] * 3))
        return builder.call(f, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def _bits(typingctx, x):
    """The bits of a float32 as an int32."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def _float(typingctx, i):
    """The float32 whose bits are the int32 ``i``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@_jit(inline="always")  # inlined, so that the loop calling it vectorizes
def _log256(x):
    bits = _bits(x)
    e = _F(np.int32((bits >> 23) - 0x7f)) + _ONE
    m = _float(np.int32((bits & ~0x7f800000) | 0x3f000000))
    small = m < _SQRTHF
    x = (m - _ONE) + (m if small else _ZERO)
    e = e - (_ONE if small else _ZERO)
    z = x * x
    y = _fma(_P0, x, _P1)
    y = _fma(y, x, _P2)
    y = _fma(y, x, _P3)
    y = _fma(y, x, _P4)
    y = _fma(y, x, _P5)
    y = _fma(y, x, _P6)
    y = _fma(y, x, _P7)
    y = _fma(y, x, _P8)
    y = y * x
    y = _fma(y, z, e * _Q1)
    y = y - z * _HALF
    return (x + y) + e * _Q2


@_jit(inline="always")
def _sincos256(x):
    j = np.int32(x * _FOPI)
    j = np.int32((j + 1) & ~1)
    y = _F(j)
    sign_sin = np.int32((j & 4) << 29)
    poly = (j & 2) == 0
    x = _fma(y, _DP1, x)
    x = _fma(y, _DP2, x)
    x = _fma(y, _DP3, x)
    sign_cos = np.int32((~(j - 2) & 4) << 29)
    z = x * x
    yc = _fma(_C0, z, _C1)
    yc = _fma(yc, z, _C2)
    yc = _fma(yc * z, z, -(z * _HALF)) + _ONE
    ys = _fma(_S0, z, _S1)
    ys = _fma(ys, z, _S2)
    ys = _fma(ys * z, x, x)
    s = (_ZERO if poly else yc) + (ys if poly else _ZERO)
    c = (yc - (_ZERO if poly else yc)) + (ys - (ys if poly else _ZERO))
    return _float(np.int32(_bits(s) ^ sign_sin)), _float(np.int32(_bits(c) ^ sign_cos))


@_jit(inline="always")
def _pairs(u1, u2, n1, n2, mean, std):
    # one flat loop over contiguous arrays: LLVM vectorizes it (8 or 16 lanes)
    for i in range(u1.size):
        radius = np.sqrt(_MTWO * _log256(u1[i]))
        s, c = _sincos256(_TWO_PI * u2[i])
        n1[i] = _fma(radius * c, std, mean)
        n2[i] = _fma(radius * s, std, mean)


_ROWS = 512  # rows of 16 transformed at a time (16 KiB per buffer: stays in L1/L2)


@_jit
def box_muller16(raw, out, mean, std):
    """``normal_fill_16_AVX2`` on rows of 16 values: ``raw`` holds the raw 32-bit outputs
    (an unsigned integer array, one per value; the uniform is its low 24 bits times
    2**-24), ``out`` (float32, same length, a multiple of 16) receives the normals.

    Each row's first 8 uniforms give ``u1 = 1 - u`` and its last 8 ``u2``. The rows are
    split into contiguous ``u1``/``u2`` buffers a few hundred rows at a time, because a
    loop over the interleaved layout does not vectorize and the flat one does."""
    rows = raw.size // 16
    u1 = np.empty(_ROWS * 8, np.float32)
    u2 = np.empty(_ROWS * 8, np.float32)
    n1 = np.empty(_ROWS * 8, np.float32)
    n2 = np.empty(_ROWS * 8, np.float32)
    for start in range(0, rows, _ROWS):
        count = min(_ROWS, rows - start)
        for b in range(count):
            o = 16 * (start + b)
            for k in range(8):
                u1[8 * b + k] = _ONE - _F(np.int32(raw[o + k] & _LOW24)) * _U24
                u2[8 * b + k] = _F(np.int32(raw[o + 8 + k] & _LOW24)) * _U24
        m = 8 * count
        _pairs(u1[:m], u2[:m], n1[:m], n2[:m], mean, std)
        for b in range(count):
            o = 16 * (start + b)
            for k in range(8):
                out[o + k] = n1[8 * b + k]
                out[o + 8 + k] = n2[8 * b + k]


@_jit
def uniform24(raw, out, low, span):
    """``uniform_real_distribution<float>(low, low + span)``: ``out[i] = fma(u, span, low)``
    with ``u`` the low 24 bits of ``raw[i]`` times 2**-24 (one rounding, as PyTorch's
    compiled kernel fuses it)."""
    for i in range(raw.size):
        out[i] = _fma(_F(np.int32(raw[i] & _LOW24)) * _U24, span, low)


_N, _M = 624, 397
_UPPER, _LOWER, _MATRIX = np.uint32(0x80000000), np.uint32(0x7FFFFFFF), np.uint32(0x9908B0DF)
_ZERO32, _ONE32 = np.uint32(0), np.uint32(1)
_B, _C = np.uint32(0x9D2C5680), np.uint32(0xEFC60000)


@_jit(inline="always")
def _mix(a, b, c):
    # one step of the recurrence: the upper bit of a, the lower 31 of b, then c
    y = (a & _UPPER) | (b & _LOWER)
    return c ^ (y >> _ONE32) ^ (_MATRIX if (y & _ONE32) != _ZERO32 else _ZERO32)


@_jit(inline="always")
def _twist(key):
    # three loops, so that each reads words of one generation only (and vectorizes)
    for k in range(_N - _M):
        key[k] = _mix(key[k], key[k + 1], key[k + _M])
    for k in range(_N - _M, _N - 1):
        key[k] = _mix(key[k], key[k + 1], key[k + _M - _N])
    key[_N - 1] = _mix(key[_N - 1], key[0], key[_M - 1])


@_jit
def mt19937_fill(key, pos, out):
    """The next ``out.size`` outputs of the 32-bit Mersenne Twister whose state is
    ``key`` (624 uint32 words, updated in place) and ``pos`` (words already used; 624:
    the next output twists first), as NumPy's ``MT19937`` makes them; returns the new
    ``pos``."""
    done = 0
    while done < out.size:
        if pos >= _N:
            _twist(key)
            pos = 0
        m = min(_N - pos, out.size - done)
        for k in range(m):  # tempering, a flat loop LLVM vectorizes
            y = key[pos + k]
            y ^= y >> np.uint32(11)
            y ^= (y << np.uint32(7)) & _B
            y ^= (y << np.uint32(15)) & _C
            y ^= y >> np.uint32(18)
            out[done + k] = y
        done += m
        pos += m
    return pos
