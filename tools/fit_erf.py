"""Refit the polynomial pieces of ``ember/ops/_erf_kernels.py`` (needs mpmath).

    python tools/fit_erf.py

For each piece and precision it raises the degree until the largest relative error
against 40-digit values on a dense grid is below the target (float64: 4.5e-16,
float32: 3e-12), and prints the ``(center, half-width, coefficients)`` tuples as they
appear in the module: a weighted least-squares fit in Chebyshev form over Chebyshev
nodes of the piece's variable, refined twice on its residual, converted to powers of
``u = (variable - center) / half-width``. Last, the float32 erf's pieces in float32
arithmetic (``_ERF32_PIECES``, see :func:`fit_erf32`), and the float32 erfinv kernel's
pieces (``_erfinv_numba._ERFINV_W``, ``_ERFINV_S``, see :func:`fit_erfinv32`).
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40


def erfcx(x):
    return mp.exp(x * x) * mp.erfc(x)


def fit(f, a, b, deg, var, weight=None, n=600):
    xs = [mp.mpf(a) + (mp.mpf(b) - a) * (1 - mp.cos(mp.pi * (k + 0.5) / n)) / 2
          for k in range(n)]
    vs = [var(x) for x in xs]
    lo, hi = min(vs), max(vs)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    us = np.array([float((v - c) / h) for v in vs])
    fv = [f(x) for x in xs]
    y = np.array([float(v) for v in fv])
    w = np.array([float(weight(x)) for x in xs]) if weight else 1 / np.abs(y)
    vander = np.polynomial.chebyshev.chebvander(us, deg) * w[:, None]
    cc, *_ = np.linalg.lstsq(vander, y * w, rcond=None)
    for _ in range(2):
        r = np.array([float(fv[i] - mp.mpf(np.polynomial.chebyshev.chebval(us[i], cc)))
                      for i in range(n)])
        d, *_ = np.linalg.lstsq(vander, r * w, rcond=None)
        cc = cc + d
    return float(c), float(h), [float(v) for v in np.polynomial.chebyshev.cheb2poly(cc)]


def horner(p, u):
    r = np.full_like(u, p[-1])
    for cf in p[-2::-1]:
        r = r * u + cf
    return r


def worst(target, a, b, var, piece, post):
    c, h, p = piece
    xs = np.linspace(a, b, 4001)
    u = (np.array([float(var(mp.mpf(v))) for v in xs]) - c) / h
    got = post(xs, horner(p, u))
    ref = np.array([float(target(mp.mpf(v))) for v in xs])
    return np.max(np.abs(got - ref) / np.abs(ref))


def sqrt_t(t):
    return mp.sqrt(t)


SPECS = {  # name: (function fitted, lo, hi, its variable, checked function, check)
    "A": (lambda t: mp.erf(sqrt_t(t)) / sqrt_t(t) if t > 0 else 2 / mp.sqrt(mp.pi),
          0, 0.25, lambda t: t, mp.erf, lambda x: x * x, lambda x, v: x * v, 1e-3, 0.5),
    "B": (erfcx, 0.5, 4.5, lambda x: 1 / (1 + x), erfcx, lambda x: 1 / (1 + x),
          lambda x, v: v, 0.5, 4.5),
    "C": (lambda x: x * erfcx(x), 4.5, 27.5, lambda x: 1 / (x * x), erfcx,
          lambda x: 1 / (x * x), lambda x, v: v / x, 4.5, 27.5),
}


def main():
    for bits, target_err in ((64, 4.5e-16), (32, 3e-12)):
        for name, (f, a, b, var, fchk, varchk, post, ca, cb) in SPECS.items():
            if bits == 32 and name == "C":
                b = cb = 10.5
            for deg in range(3, 26):
                piece = fit(f, a, b, deg, var)
                err = worst(fchk, ca, cb, varchk, piece, post)
                if err < target_err:
                    break
            print(f"# {name}{bits}: degree {deg}, worst relative error {err:.2e}")
            print(f"_{name}{bits} = {piece!r}")
    fit_erf32()
    fit_erfinv32()


def _lsq32(f, lo, hi, deg, center, n=3000):
    """Coefficients (lowest power first, each a float32) of a degree-``deg`` polynomial
    in ``v - center`` fitting ``f`` on [lo, hi]: least squares on ``n`` Chebyshev nodes,
    each coefficient rounded to float32 in turn and the higher ones refitted to what is
    left."""
    k = np.arange(n)
    xs = lo + (hi - lo) * (1 - np.cos(np.pi * (k + 0.5) / n)) / 2
    y = np.array([float(f(mp.mpf(float(v)))) for v in xs])
    vander = np.vander(xs - center, deg + 1, increasing=True)
    q = []
    for i in range(deg + 1):
        rest = y - (vander[:, :i] @ np.array(q) if q else 0)
        c, *_ = np.linalg.lstsq(vander[:, i:], rest, rcond=None)
        q.append(float(np.float32(c[0])))
    return q


def fit_erf32():
    """``_ERF32_PIECES``: float32 erf in float32 arithmetic, five pieces of 8 terms
    (tools/check_erf32.py --only erf32 measures the error of the float32 evaluation
    over every float32)."""
    edges = [0.75, 1.25, 2.0, 3.0]
    q = _lsq32(lambda s: mp.erf(mp.sqrt(s)) / mp.sqrt(s) - 1 if s > 0
               else 2 / mp.sqrt(mp.pi) - 1, 0.0, 0.75 ** 2, 7, 0.0)
    pieces = [(0.0, 0.0, tuple(q[::-1]))]
    for lo, hi in zip(edges, edges[1:] + [3.92]):
        c = round((lo + hi) / 2 * 64) / 64  # a - c is exact over the piece (Sterbenz)
        k = 1.0 if hi == 3.92 else float(np.float32(mp.erf(c)))
        p = _lsq32(lambda x, k=k: mp.erf(x) - k, lo, hi, 7, c)
        pieces.append((c, k, tuple(p[::-1])))
    print(f"_ERF32_PIECES = {tuple(pieces)!r}")


def fit_erfinv32(n=600):
    """``_erfinv_numba._ERFINV_T``, ``_ERFINV_W`` and ``_ERFINV_S``: ``erfinv(x) / x`` as
    polynomials in ``u``, coefficients lowest power first: for ``|x| < 0.75`` 16 terms in
    ``u = x*x / 0.28125 - 1``; for ``w = -log(1 - x*x) < 5`` (``|x| < 0.99663``) 16 terms
    in ``u = w / 2.5 - 1``, beyond (up to ``w = 16``, past the last
    float32 below 1) 16 terms in ``u`` mapping ``sqrt(w)`` from [sqrt(5), 4] onto [-1, 1].
    Each a relative least-squares fit in Chebyshev form on Chebyshev nodes of ``u``,
    refined twice on its residual (the float32 pass checks its values against a float32
    rounding midpoint: tools/check_erf32.py --only erfinv measures the distance from the
    NumPy path's over every float32 input)."""
    def f(w):
        if w == 0:
            return mp.sqrt(mp.pi) / 2
        x = mp.sqrt(-mp.expm1(-w))
        return mp.erfinv(x) / x
    lo = mp.sqrt(5)
    pieces = {"T": (16, lambda u: -mp.log1p(-(u + 1) * mp.mpf(0.28125))),
              "W": (16, lambda u: (u + 1) * mp.mpf(2.5)),
              "S": (16, lambda u: (lo + (u + 1) * (4 - lo) / 2) ** 2)}
    for name, (terms, w_of_u) in pieces.items():
        us = np.cos(np.pi * (np.arange(n) + 0.5) / n)
        fv = [f(w_of_u(mp.mpf(float(u)))) for u in us]
        y = np.array([float(v) for v in fv])
        wt = 1 / np.abs(y)
        vander = np.polynomial.chebyshev.chebvander(us, terms - 1) * wt[:, None]
        cc, *_ = np.linalg.lstsq(vander, y * wt, rcond=None)
        for _ in range(2):
            r = np.array([float(fv[i] - mp.mpf(np.polynomial.chebyshev.chebval(us[i], cc)))
                          for i in range(n)])
            d, *_ = np.linalg.lstsq(vander, r * wt, rcond=None)
            cc = cc + d
        q = [float(v) for v in np.polynomial.chebyshev.cheb2poly(cc)]
        check = np.linspace(-1, 1, 2001)
        got = np.polynomial.polynomial.polyval(check, q)
        ref = np.array([float(f(w_of_u(mp.mpf(float(u))))) for u in check])
        print(f"# erfinv32 {name}: {terms} terms, worst relative error "
              f"{np.max(np.abs(got / ref - 1)):.2e}")
        print(f"_ERFINV_{name} = {tuple(q)!r}")


if __name__ == "__main__":
    main()
