"""Refit the polynomial pieces of ``ember/ops/_erf_kernels.py`` (needs mpmath).

    python tools/fit_erf.py

For each piece and precision it raises the degree until the largest relative error
against 40-digit values on a dense grid is below the target (float64: 4.5e-16,
float32: 3e-12), and prints the ``(center, half-width, coefficients)`` tuples as they
appear in the module: a weighted least-squares fit in Chebyshev form over Chebyshev
nodes of the piece's variable, refined twice on its residual, converted to powers of
``u = (variable - center) / half-width``.
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
    # erf alone in float32: erfc needed to 3e-12 of erf, up to 3.95
    for deg in range(6, 14):
        piece = fit(erfcx, 0.5, 3.95, deg, lambda x: 1 / (1 + x),
                    weight=lambda x: mp.exp(-x * x) / mp.erf(x))
        xs = np.linspace(0.5, 3.95, 3001)
        c, h, p = piece
        e = horner(p, (1 / (1 + xs) - c) / h)
        got = 1 - np.exp(-xs * xs) * e
        ref = np.array([float(mp.erf(mp.mpf(v))) for v in xs])
        err = np.max(np.abs(got - ref) / ref)
        if err < 3e-12:
            break
    print(f"# B32_ERF: degree {deg}, worst relative error of erf {err:.2e}")
    print(f"_B32_ERF = {piece!r}")


if __name__ == "__main__":
    main()
