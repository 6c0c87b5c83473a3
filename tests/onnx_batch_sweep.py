"""The ONNX dynamic-batch sweep: the op oracle's cases exported with a symbolic batch axis.

Each case of the op tables (tests/test_ops_*.py) becomes a module whose ``forward`` is the
case's function; it is exported with axis 0 of its batch inputs named ``batch`` and run in
onnxruntime at the example's batch size and at a larger one, each compared with eager
ember. The batch inputs are input 0 alone or, when eager rejects that (a matmul's
contraction, a binary op without broadcasting), every input whose axis 0 has the same
size; a case that eager rejects either way, or whose inputs are 0-d, is left out.

An op ember cannot export raises its "no ONNX converter" error; such a case counts as
unsupported. A case that exports must give eager's shapes and values at both sizes:
that is what ``dynamic_axes`` promises.

``python tests/onnx_batch_sweep.py`` prints the figures and each case that differs.
"""
import io
import warnings

import numpy as np
from oracle import make_inputs

import ember
import ember.onnx

TABLES = {
    "test_ops_elementwise": ["UNARY", "BINARY", "COMPARE"],
    "test_ops_reduction": ["SUMS", "PRODS", "EXTREMA", "STATS", "NORMS", "LOGICAL",
                           "SOFTMAX", "SCANS"],
    "test_ops_shape": ["VIEWS", "MOVES", "JOINS", "SPLITS", "REPEATS", "PADS", "DIAGS"],
    "test_ops_indexing": ["GETITEM", "GATHERS", "MASKED", "SCATTER_REDUCE"],
    "test_ops_linalg": ["MATMUL", "PRODUCTS", "EINSUM", "NORMS", "CDIST"],
    "test_nn_functional": ["ACTIVATIONS", "LINEAR", "LOSSES"],
}
GROW = 3  # added to the batch axis for the second run


def cases():
    """[(table name, Case)] of the op tables."""
    import importlib
    out = []
    for mod_name, tables in TABLES.items():
        mod = importlib.import_module(mod_name)
        for t in tables:
            for case in getattr(mod, t):
                out.append((f"{mod_name[5:]}.{t}", case))
    return out


class _Fn(ember.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(ember, *xs)


def _flat(out):
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in out if isinstance(o, ember.Tensor)]


def _eager(case, arrays):
    with ember.no_grad():
        return [o.numpy() for o in _flat(case.fn(ember, *[ember.tensor(a) for a in arrays]))]


def _grown(arrays, which):
    rng = np.random.default_rng(1)
    out = []
    for i, a in enumerate(arrays):
        if i in which:
            extra = np.asarray(a)[:1].repeat(GROW, 0)
            if a.dtype.kind == "f":
                extra = rng.standard_normal(extra.shape).astype(a.dtype)
            a = np.concatenate([a, extra], 0)
        out.append(a)
    return out


def _batch_plan(case, arrays):
    """(batch input indices, grown arrays, eager outputs at both sizes) or None."""
    if not arrays or not isinstance(arrays[0], np.ndarray) or arrays[0].ndim == 0:
        return None
    n0 = arrays[0].shape[0]
    if n0 < 2:
        return None  # a batch of 0 or 1 is one the exporter may specialise (as torch's)
    plans = [[i for i, a in enumerate(arrays)
              if isinstance(a, np.ndarray) and a.ndim and a.shape[0] == n0], [0]]
    base = _eager(case, arrays)
    for which in plans:
        big = _grown(arrays, which)
        try:
            want = _eager(case, big)
        except Exception:
            continue
        return which, big, base, want
    return None


def run_case(case):
    """'skip', 'unsupported', 'equal', or a string saying what differs."""
    try:
        # float32, the dtype ONNX runtimes implement every kernel for
        arrays = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64
                  else a for a in make_inputs(case)]
    except Exception:
        return "skip"
    if any(not isinstance(a, np.ndarray) for a in arrays):
        return "skip"
    try:
        plan = _batch_plan(case, arrays)
    except Exception:
        return "skip"
    if plan is None:
        return "skip"
    which, big, base, want = plan
    names = [f"x{i}" for i in range(len(arrays))]
    f = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ember.onnx.export(_Fn(case.fn), tuple(ember.tensor(a) for a in arrays), f,
                              input_names=names,
                              dynamic_axes={names[i]: {0: "batch"} for i in which})
    except (ember.onnx.UnsupportedOnnxExport, NotImplementedError):
        return "unsupported"
    except Exception as e:
        return f"export failed: {type(e).__name__}: {str(e)[:200]}"
    import onnxruntime as ort
    try:
        sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    except Exception as e:
        return f"onnxruntime rejects the file: {str(e)[:200]}"
    for label, a, w in (("example batch", arrays, base), ("grown batch", big, want)):
        feed = {n: x for n, x in zip(names, a) if n in {i.name for i in sess.get_inputs()}}
        try:
            got = sess.run(None, feed)
        except Exception as e:
            return f"{label}: onnxruntime failed: {str(e)[:200]}"
        if len(got) != len(w):
            return f"{label}: {len(got)} outputs, eager has {len(w)}"
        for g, e in zip(got, w):
            if g.shape != e.shape:
                return f"{label}: shape {g.shape}, eager {e.shape}"
            tol = 1e-2 if e.dtype == np.float16 else 1e-4
            if e.dtype.kind in "fc" and not np.allclose(g, e, rtol=tol, atol=tol,
                                                        equal_nan=True):
                return f"{label}: values differ (max {np.nanmax(np.abs(g - e))})"
            if e.dtype.kind not in "fc" and not np.array_equal(g, e):
                return f"{label}: values differ"
    return "equal"


def sweep():
    """{case id: outcome} over every case."""
    ember.onnx.export  # noqa: B018 (import check)
    out = {}
    for table, case in cases():
        out[f"{table}:{case.name}"] = run_case(case)
    return out


if __name__ == "__main__":
    import collections
    import sys
    sys.path.insert(0, "tests")
    res = sweep()
    kinds = collections.Counter(v if v in ("skip", "unsupported", "equal") else "differs"
                                for v in res.values())
    print(dict(kinds))
    for k, v in res.items():
        if v not in ("skip", "unsupported", "equal"):
            print(k, "->", v)
