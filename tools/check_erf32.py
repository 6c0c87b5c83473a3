"""Check the float32 one-pass kernels of ``ember/ops/_erf_numba.py`` against the NumPy
path of ``ember/ops/_erf_kernels.py`` on every float32 input (needs numba).

    python tools/check_erf32.py [--quick | --step N] [--only erf32,erf,erfinv,exp32]
                                [--positive] [--torch] [--bits-every N]

For float32 erf (``erf32``; the exact GELU evaluates it at ``x / sqrt 2``, itself a
float32), computed in float32 arithmetic by both paths, it compares the kernel's results
with the NumPy path's, bit for bit (NaN payloads aside), over all
2**32 bit patterns (``--quick``: every 97th; ``--positive``: the 2**31 with the sign bit
clear, as both paths compute ``|x|``'s value and copy the sign), and measures the
largest error in float32 ulps against the true value (float64 ``math.erf``), and with
``--torch`` torch's ``erf``'s and the distance between the two. ``--bits-every N``
compares the bits on every N-th of those inputs only (the NumPy path is most of the
time).

For erfc (``erf``: erfc, and both together), the same bits, and over the inputs where
the kernels compute a value of their own (``|x| >= 0.5`` up to the cap), the largest
distance in float64 ulps between the two paths' values before rounding to float32: the
kernels flag an element within ``_TOL`` ulps of a rounding midpoint, so that distance
must stay below ``_TOL`` for the check to hold by construction and not merely on these
inputs.

For the float32 exponential of the exact GELU's gradient (``exp32``: ``_k.exp32_neg``,
``_erf_numba._exp32_neg``), over every float32 ``z <= 0`` (-0 to -inf, 2**31 bit
patterns, and NaN): the two paths' bits, the largest error in ulps against float64
``math.exp`` (2**-149 among the subnormals) and NumPy's own float32 ``exp``'s (with
``--torch`` torch's too).

For erfinv, the same over every float32 of [-1, 1] (and a few beyond): the bits, and the
largest distances before rounding between the NumPy path's value and the kernel's two:
its fits' (checked against ``_INV_TOL``) and its Halley step's (taken where the fits'
is flagged; checked against ``_TOL``).
"""
import argparse
import math
import time

import numba
import numpy as np

from ember.ops import _erf_kernels as _k
from ember.ops import _erf_numba as _n
from ember.ops import _erfinv_numba as _ni


@numba.njit(nogil=True, error_model="numpy")
def _values(x, out):
    """The erfc kernel's float64 values before rounding."""
    for i in range(x.size):
        out[i] = _n._erfc32_value(np.float64(x[i]), True, True)[1]


@numba.njit(nogil=True, error_model="numpy")
def _max_ulps(x, y):
    """The largest distance of the float32 ``y`` from erf of ``x`` (float64
    ``math.erf``), in ulps of the float32 binade holding the true value (2**-149 among
    the subnormals), and the input where it is reached."""
    worst, at = 0.0, np.float32(0.0)
    for i in range(x.size):
        ref = math.erf(np.float64(x[i]))
        if ref != ref:
            continue
        r = abs(ref)
        e = max(math.frexp(r)[1] - 1, -126)  # r in [2**e, 2**(e + 1))
        d = abs(np.float64(y[i]) - ref) / math.ldexp(1.0, e - 23)
        if d > worst:
            worst, at = d, x[i]
    return worst, at


@numba.njit(nogil=True, error_model="numpy")
def _erfinv_values(x, out):
    """The erfinv kernel's Halley values of ``|x|`` before rounding."""
    for i in range(x.size):
        out[i] = _ni._erfinv32_value(np.float64(x[i]))[0]


@numba.njit(nogil=True, error_model="numpy")
def _max_ulps_exp(z, y):
    """``_max_ulps`` for exp instead of erf."""
    worst, at = 0.0, np.float32(0.0)
    for i in range(z.size):
        ref = math.exp(np.float64(z[i]))
        if ref != ref:
            continue
        e = max(math.frexp(ref)[1] - 1, -126)
        d = abs(np.float64(y[i]) - ref) / math.ldexp(1.0, e - 23)
        if d > worst:
            worst, at = d, z[i]
    return worst, at


def _check_exp32(step, with_torch, bits_every):
    t0 = time.time()
    chunk = 1 << 24
    start, end = 0x80000000, 0xFF800001  # -0 down to -inf
    differ, n = 0, 0
    worst = {"kernel": (0.0, 0.0), "numpy": (0.0, 0.0), "torch": (0.0, 0.0)}
    if with_torch:
        import torch
        torch.set_num_threads(1)
    for lo in range(start, end, chunk * step):
        z = np.arange(lo, min(lo + chunk * step, end), step,
                      dtype=np.uint64).astype(np.uint32).view(np.float32)
        mine = np.empty_like(z)
        _n._exp32_pass(z, mine)
        differ += _differ(mine[::bits_every], _k.exp32_neg(z[::bits_every]))
        n += z.size
        got = {"kernel": mine, "numpy": np.exp(z)}
        if with_torch:
            got["torch"] = torch.exp(torch.from_numpy(z)).numpy()
        for k, y in got.items():
            worst[k] = max(worst[k], _max_ulps_exp(z, y))
    nan = np.array([np.nan], np.float32)
    differ += _differ(_n._exp32_neg(nan[0]) * np.ones(1, np.float32), _k.exp32_neg(nan))
    print(f"float32 exp of z <= 0: {n} inputs ({time.time() - t0:.0f} s): differing "
          f"results (kernel against NumPy path, every {bits_every}) {differ}; largest "
          "error " + "; ".join(f"{k} {v[0]:.4f} ulp (at {v[1]!r})" for k, v in worst.items()
                               if k != "torch" or with_torch))


def _numpy_path(x, want_erf, want_erfc, fn=None):
    """``_k.erf_erfc`` (or ``fn``) with the numba kernels switched off."""
    saved = _k._FUSED.get("erf", "unset")
    _k._FUSED["erf"] = None
    try:
        return fn(x) if fn else _k.erf_erfc(x, want_erf, want_erfc)
    finally:
        _k._FUSED["erf"] = saved


def _erfinv_reference(a):
    """``_k._erfinv``'s float32 value of ``a`` in [0, 1) before its rounding."""
    w = -np.log((1.0 - a) * (1.0 + a))
    y = np.where(w < 5.0, _k._horner(_k._GILES_CENTRAL, w - 2.5),
                 _k._horner(_k._GILES_TAIL, np.sqrt(w) - 3.0))
    y *= a
    return _k._halley(y, a, 32)


def _check_erfinv(step, bits_every):
    t0 = time.time()
    one = int(np.float32(1.0).view(np.uint32))
    differ, gap, fit_gap, n = 0, 0, 0, 0
    chunk = 1 << 24
    for start in range(0, one + 1, chunk * step):
        x = np.arange(start, min(start + chunk * step, one + 1), step,
                      dtype=np.uint32).view(np.float32)
        for xs in (x[::bits_every], -x[::bits_every]):
            differ += _differ(_ni.erfinv32(xs), _numpy_path(xs, 0, 0, _k.erfinv))
            n += xs.size
        inside = x[x < 1]
        ref = _erfinv_reference(inside.astype(np.float64))
        ok = ref >= 2.0 ** -125  # (below, the kernel leaves them to NumPy)
        refbits = ref.view(np.int64)[ok]
        for values, worst in ((_erfinv_values, "gap"), (_ni._erfinv32_fits_pass, "fit_gap")):
            mine = np.empty(inside.size)
            values(inside, mine)
            d = int(np.abs(mine.view(np.int64)[ok] - refbits).max(initial=0))
            if worst == "gap":
                gap = max(gap, d)
            else:
                fit_gap = max(fit_gap, d)
    extra = np.array([1.5, -1.5, np.inf, -np.inf, np.nan, 2.0, -3e38], np.float32)
    differ += _differ(_ni.erfinv32(extra), _numpy_path(extra, 0, 0, _k.erfinv))
    print(f"erfinv: {n + extra.size} float32 inputs compared ({time.time() - t0:.0f} s): "
          f"differing results {differ}; largest gap before rounding over [0, 1): fits "
          f"{fit_gap} float64 ulps (flagged within {_ni._INV_TOL}; "
          f"2**{math.log2(max(fit_gap, 1)):.1f}), Halley step {gap} (flagged within "
          f"{_n._TOL}; 2**{math.log2(max(gap, 1)):.1f})")


def _check_erf32(step, end, with_torch, bits_every):
    import torch
    torch.set_num_threads(1)
    t0 = time.time()
    chunk = 1 << 24
    differ, n, worst, worst_torch, torch_worst = 0, 0, (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)
    for start in range(0, end, chunk * step):
        x = np.arange(start, min(start + chunk * step, end), step,
                      dtype=np.uint64).astype(np.uint32).view(np.float32)
        fast = _n.erf_erfc(x, True, False)[0]
        differ += _differ(fast[::bits_every], _numpy_path(x[::bits_every], True, False)[0])
        n += x.size
        worst = max(worst, _max_ulps(x, fast))
        if not with_torch:
            continue
        theirs = torch.erf(torch.from_numpy(x)).numpy()
        torch_worst = max(torch_worst, _max_ulps(x, theirs))
        # from torch's, in ulps of the binade of the true value
        d = np.abs(fast.astype(np.float64) - theirs)
        ok = np.isfinite(d)
        ref = np.abs(x[ok].astype(np.float64))
        e = np.maximum(np.frexp(np.abs(fast[ok].astype(np.float64)))[1] - 1, -126)
        if ref.size:
            i = int(np.argmax(d[ok] / np.ldexp(1.0, e - 23)))
            worst_torch = max(worst_torch, (float(d[ok][i] / np.ldexp(1.0, e[i] - 23)),
                                            float(x[ok][i])))
    print(f"float32 erf: {n} inputs ({time.time() - t0:.0f} s): differing results "
          f"(kernel against NumPy path, every {bits_every}) {differ}; largest error "
          f"{worst[0]:.4f} ulp (at {worst[1]!r})" + (
              f"; torch's erf {torch_worst[0]:.4f} ulp (at {torch_worst[1]!r}); largest "
              f"distance between the two {worst_torch[0]:.4f} ulp (at {worst_torch[1]!r})"
              if with_torch else ""))


def _differ(a, b):
    return np.count_nonzero((a.view(np.uint32) != b.view(np.uint32)) &
                            ~(np.isnan(a) & np.isnan(b)))


def _ulp_gap(x):
    """Largest distance between the two paths' unrounded values: in float64 ulps, and
    relative in units of 2**-52 where the value is below 2**-125 (there the kernels
    check the value relatively: see ``_erfc32_unsure``)."""
    xd = x.astype(np.float64)
    mine = np.empty_like(xd)
    _values(x, mine)
    ref = _k._erf_erfc(xd, False, True, bits=32)[1]
    ok = np.isfinite(ref) & (np.abs(ref) >= 2.0 ** -125)
    gap = np.abs(mine.view(np.int64)[ok] - ref.view(np.int64)[ok])
    low = np.isfinite(ref) & (np.abs(ref) < 2.0 ** -125) & (ref != 0)
    rel = np.abs(mine[low] / ref[low] - 1) * 2.0 ** 52
    return (int(gap.max()) if gap.size else 0), (float(rel.max()) if rel.size else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="every 97th bit pattern")
    ap.add_argument("--step", type=int, default=1, help="every N-th bit pattern")
    ap.add_argument("--only", default="erf32,erf,erfinv")
    ap.add_argument("--positive", action="store_true",
                    help="float32 erf: the inputs with the sign bit clear only")
    ap.add_argument("--torch", action="store_true", help="float32 erf: torch's as well")
    ap.add_argument("--bits-every", type=int, default=1,
                    help="float32 erf and erfinv: compare the bits on every N-th input only")
    args = ap.parse_args()
    step = 97 if args.quick else args.step
    only = args.only.split(",")
    if "exp32" in only:
        _check_exp32(step, args.torch, args.bits_every)
    if "erfinv" in only:
        _check_erfinv(step, args.bits_every)
    if "erf32" in only:
        _check_erf32(step, 1 << (31 if args.positive else 32), args.torch, args.bits_every)
    if "erf" not in only:
        return
    chunk = 1 << 24
    diffs = {"erfc": 0, "erfc with erf": 0}
    t0 = time.time()
    for start in range(0, 1 << 32, chunk * step):
        x = np.arange(start, min(start + chunk * step, 1 << 32), step,
                      dtype=np.uint64).astype(np.uint32).view(np.float32)
        diffs["erfc"] += _differ(_n.erf_erfc(x, False, True)[1], _numpy_path(x, False, True)[1])
        diffs["erfc with erf"] += _differ(_n.erf_erfc(x, True, True)[1],
                                          _numpy_path(x, True, True)[1])
    n = len(range(0, 1 << 32, step))
    print(f"{n} float32 inputs ({time.time() - t0:.0f} s): differing results {diffs}")
    # the inputs where the kernels' own exponential is used, every one of them
    for name, cap in (("erfc", _n._CAP32),):
        lo = np.float32(0.5).view(np.uint32)
        hi = np.float32(cap).view(np.uint32) + 1
        x = np.arange(lo, hi, dtype=np.uint32).view(np.float32)
        (g1, r1), (g2, r2) = _ulp_gap(x), _ulp_gap(-x)
        gap, rel = max(g1, g2), max(r1, r2)
        print(f"{name}: largest gap before rounding over {2 * x.size} inputs in "
              f"[0.5, {cap}] and their negations: {gap} float64 ulps "
              f"(flagged within {_n._TOL}; 2**{math.log2(max(gap, 1)):.1f}); below "
              f"2**-125: {rel:.1f} * 2**-52 relative (flagged within {_n._TOL})")


if __name__ == "__main__":
    main()
