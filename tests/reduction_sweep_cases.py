"""Sweep table for the reductions: sum, mean, prod, nansum, nanmean, std/var (and
_mean), amax/amin, max/min, argmax/argmin, aminmax, logsumexp, norm/vector_norm,
count_nonzero, all/any, the cumulative scans, median/nanmedian, mode and
quantile/nanquantile; cases as (op, name, fn(E), rtol) over dims, dtypes, layouts,
empty and special-valued inputs."""
import numpy as np

CASES = []

NAN, INF = float("nan"), float("inf")
# named inputs: seeded normals by shape, or literal data
DATA = {
    "0d": np.array(1.25),
    "1d": (5,),
    "2d": (3, 4),
    "3d": (2, 3, 4),
    "e0": np.zeros((0,)),
    "e03": np.zeros((0, 3)),
    "e30": np.zeros((3, 0)),
    "sp": [[NAN, 1.0, -0.0, 2.0], [INF, -INF, 3.0, -0.0], [-0.0, -0.0, -0.0, -0.0],
           [1.0, NAN, NAN, -1.0]],
    "big": [[60000.0, 60000.0, 1.0], [1e4, -3e4, 5e4]],
}
FLOATS = ("f32", "f64", "f16", "bf16")
INTS = ("i32", "i64", "u8", "b")


def _x(E, key, dt, layout="c", grad=False):
    d = DATA[key]
    if isinstance(d, tuple):
        d = E.rng.standard_normal(d)
    a = np.asarray(d, dtype=np.float64)
    if dt in ("i32", "i64", "u8"):
        a = np.round(np.abs(a) * 3) if dt == "u8" else np.round(a * 3)
    if dt == "b":
        a = np.round(a) != 0
    if dt == "bf16":
        return E.t(a, "f32", layout=layout).to(E.m.bfloat16)
    if dt == "c64":
        return E.t(a + 0.5j * a[..., ::-1] if a.ndim else a + 0.5j, "c64", layout=layout)
    return E.t(a, dt, grad=grad and dt in ("f32", "f64"), layout=layout)


def _kw(E, kw):
    return {k: (getattr(E.m, v) if k == "dtype" else v) for k, v in kw.items()}


def case(op, name, fn, rtol=1e-6):
    CASES.append((op, name, fn, rtol))


def _rtol(dt):
    return {"f16": 2e-3, "bf16": 2e-2}.get(dt, 1e-5 if dt != "f64" else 1e-9)


def sweep(op, call, keys, dtypes, kwargs_list, layouts=("c",), grad=True):
    """One case per input x dtype x kwargs (x layout for the 2-d/3-d inputs)."""
    for key in keys:
        for dt in dtypes:
            if key in ("sp", "big") and dt in INTS:
                continue
            for kw in kwargs_list:
                for lay in (layouts if key in ("2d", "3d", "sp") else ("c",)):
                    name = f"{key}_{dt}_{lay}_" + ",".join(f"{k}={v}" for k, v in kw.items())

                    def fn(E, key=key, dt=dt, lay=lay, kw=kw):
                        x = _x(E, key, dt, lay, grad)
                        return call(E.m, x, **_kw(E, kw))
                    case(op, name, fn, _rtol(dt))


ALLKEYS = tuple(DATA)
DIMS = [{}, {"dim": 0}, {"dim": -1}, {"dim": 1, "keepdim": True}, {"dim": (0, 1)},
        {"dim": (-1, 0), "keepdim": True}, {"dim": ()}, {"dim": (0, 0)}, {"dim": 2}]
LAY = ("c", "T", "s")

for op in ("sum", "nansum", "mean", "nanmean", "amax", "amin", "logsumexp",
           "count_nonzero", "all", "any"):
    dts = FLOATS + INTS + ("c64",)
    sweep(op, lambda m, x, op=op, **kw: getattr(m, op)(x, **kw), ALLKEYS, dts, DIMS, LAY)
for op in ("sum", "nansum", "mean", "nanmean", "prod", "cumsum", "cumprod"):
    kws = [{"dtype": "float64"}, {"dim": 0, "dtype": "float32"}, {"dim": 0, "dtype": "int64"}]
    if op in ("cumsum", "cumprod"):
        kws = [{"dim": 0, "dtype": "float64"}, {"dim": -1, "dtype": "float32"},
               {"dim": 0, "dtype": "int64"}]
    sweep(op + "_dtype", lambda m, x, op=op, **kw: getattr(m, op)(x, **kw),
          ("0d", "2d", "e03", "big"), ("f32", "f16", "i32", "b", "u8"), kws)

PROD = [{}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": 2}]
sweep("prod", lambda m, x, **kw: m.prod(x, **kw), ALLKEYS, FLOATS + INTS + ("c64",), PROD, LAY)

VAR = [{}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": (0, 1)}, {"dim": ()},
       {"correction": 0}, {"dim": 0, "correction": 2}, {"dim": 1, "unbiased": False},
       {"unbiased": True}, {"dim": (0, 0)}, {"dim": 0, "correction": 5}]
for op in ("std", "var", "std_mean", "var_mean"):
    sweep(op, lambda m, x, op=op, **kw: getattr(m, op)(x, **kw), ALLKEYS,
          FLOATS + ("i64", "c64"), VAR, LAY)

MAXD = [{}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": 2}]
for op in ("max", "min", "argmax", "argmin", "median", "nanmedian", "aminmax"):
    kws = MAXD if op != "aminmax" else [{}, {"dim": 0}, {"dim": -1, "keepdim": True},
                                        {"dim": 2}]
    sweep(op, lambda m, x, op=op, **kw: getattr(m, op)(x, **kw), ALLKEYS,
          FLOATS + INTS, kws, LAY)
sweep("mode", lambda m, x, **kw: m.mode(x, **kw), ALLKEYS, FLOATS + INTS,
      [{}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": 2}], LAY)

for op in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"):
    sweep(op, lambda m, x, op=op, **kw: getattr(m, op)(x, **kw), ALLKEYS,
          FLOATS + INTS + ("c64",), [{"dim": 0}, {"dim": -1}, {"dim": 2}], LAY)

NORM = [{"p": p} for p in (0, 1, 2, INF, -INF, 0.5, 3, "fro")] + [
    {"p": 2, "dim": 0}, {"p": 1, "dim": (0, 1), "keepdim": True}, {"p": INF, "dim": -1}]
sweep("norm", lambda m, x, **kw: m.norm(x, **kw), ALLKEYS, FLOATS + ("i64", "c64"), NORM, LAY)
VN = [{"ord": p} for p in (0, 1, 2, INF, -INF, 0.5, 3)] + [
    {"ord": 2, "dim": 0}, {"ord": 0, "dim": -1, "keepdim": True}, {"ord": INF, "dim": (0, 1)},
    {"ord": -INF, "dim": 0}, {"ord": 2, "dtype": "float64"}, {"ord": 2, "dim": ()}]
sweep("vector_norm", lambda m, x, **kw: m.linalg.vector_norm(x, **kw), ALLKEYS,
      FLOATS + ("i64", "c64"), VN, LAY)

Q = [{"q": 0.3}, {"q": 0.5, "dim": 0}, {"q": 0.75, "dim": -1, "keepdim": True}]
Q += [{"q": 0.4, "dim": 0, "interpolation": i}
      for i in ("linear", "lower", "higher", "midpoint", "nearest")]
Q += [{"q": 1.5}, {"q": -0.1, "dim": 0}]
for op in ("quantile", "nanquantile"):
    sweep(op, lambda m, x, op=op, **kw: getattr(m, op)(x, **kw), ALLKEYS,
          ("f32", "f64", "f16", "i64"), Q, LAY)
    sweep(op + "_qtensor", lambda m, x, op=op, **kw: getattr(m, op)(
        x, m.tensor([0.1, 0.5, 0.9], dtype=x.dtype if x.is_floating_point() else None), **kw),
        ALLKEYS, ("f32", "f64"), [{}, {"dim": 0}, {"dim": 1, "keepdim": True}], LAY)
