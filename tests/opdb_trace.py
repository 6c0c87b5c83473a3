"""PyTorch's OpInfo ops traced and exported at one sample, run at others.

The ops are test_opinfo.py's selection (``PRESENT``, with its mapping from an OpInfo to
ember's function and its conversion of arguments). For each op, in float32 and in int64
where the op takes it, each of its first :data:`SAMPLES` samples becomes a function of
its tensor arguments (nested in lists or keywords too; numbers, dtypes and the other
arguments fixed), wrapped in a small module on each side. Its *variants* are the other
samples of the same op and dtype with the same structure (the same non-tensor arguments,
the same number of tensors of the same dtype and rank: other shapes, other values) and
the sample itself with other values (float tensors redrawn, integer tensors permuted, so
indices stay in range). Then:

1. ``ember.jit.trace`` and ``torch.jit.trace`` at the sample run at every variant; each
   trace must give its own eager result (to float32 rounding) or have emitted a
   ``TracerWarning``. Where torch's trace generalises, ember's must; where torch's warns
   ember's must warn (or generalise).
2. ``ember.jit.save`` of ember's trace, read back by the real ``torch.jit.load``, runs at
   the sample and at every variant where ember's trace generalises, against torch's
   eager op. An op with no TorchScript spelling raises ``NotImplementedError`` naming
   it: counted as ``unspelled``.
3. ``ember.onnx.export`` with an axis named wherever the variants' sizes differ runs in
   onnxruntime at the sample and at each variant, against eager ember. An op with no ONNX
   spelling raises ``UnsupportedOnnxExport``: counted as ``unsupported``.

``python tests/opdb_trace.py [op ...]`` prints each case's outcome and the counts.
"""
import io
import warnings

import numpy as np
import onnxruntime as ort
import torch
from module_db_trace import _err, _Leaf, _rebuild, _structure, same
from test_opinfo import PRESENT, RANDOM_SAMPLE, _ember_fn, _key, _samples, _to_ember
from trace_sweep import _variants

import ember
import ember.onnx
from ember.jit import TracerWarning

ort.set_default_logger_severity(3)
_QUIET = ort.SessionOptions()
_QUIET.log_severity_level = 3
_QUIET_RUN = ort.RunOptions()
_QUIET_RUN.log_severity_level = 4

# in-place resizes: the memory they add is uninitialised, so no two runs agree
UNINITIALISED = {"resize_", "resize_as_"}
# samples traced per op and dtype
SAMPLES = 3
# samples drawn per op and dtype to find variants among
POOL = 10
DTYPES = (torch.float32, torch.int64)
# variants with one dimension grown (trace_sweep's) per case
GROWN = 4


class Call(ember.nn.Module):
    """A module whose forward is ``fn``: what ``jit.trace`` and ``onnx.export`` of a plain
    call are given in the trace and export tests."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _kind(skeleton, leaves):
    """The structure's key: the arguments with each tensor replaced by its dtype and
    rank (two samples with the same key trace to functions of the same signature)."""
    def key(x):
        if isinstance(x, _Leaf):
            t = leaves[x.i]
            return ("T", str(t.dtype), t.dim())
        if isinstance(x, (tuple, list)):
            return (type(x).__name__,) + tuple(key(v) for v in x)
        if isinstance(x, dict):
            return ("dict",) + tuple((k, key(v)) for k, v in sorted(x.items()))
        return repr(x)
    return key(skeleton)


class Case:
    """One sample of one op: ``skeleton`` (input, args, kwargs with tensors as leaves),
    ``arrays`` (its tensors as NumPy), ``variants`` [(label, arrays)]."""

    def __init__(self, op, dtype, index, sample, skeleton, arrays):
        self.op, self.dtype, self.index, self.sample = op, dtype, index, sample
        self.skeleton, self.arrays, self.variants = skeleton, arrays, []

    @property
    def name(self):
        return f"{_key(self.op)}/{str(self.dtype).split('.')[1]}/{self.index}"


def _arrays(leaves):
    return [t.detach().resolve_conj().numpy().copy() for t in leaves]


def _other_values(arrays, seed):
    rng = np.random.default_rng(seed)
    out = []
    for a in arrays:
        if a.dtype.kind == "f":
            b = rng.standard_normal(a.shape).astype(a.dtype)
            # keep the sample's sign pattern: a domain the op allows stays allowed
            b = np.where(a < 0, -np.abs(b), np.where(a > 0, np.abs(b), a)).astype(a.dtype)
        elif a.dtype.kind in "iu" and a.size > 1:
            b = rng.permutation(a.reshape(-1)).reshape(a.shape)
        else:
            b = a.copy()
        out.append(b)
    return out


def cases(ops=None, dtypes=DTYPES, samples=SAMPLES):
    """Every :class:`Case` of the selected ops (all of ``PRESENT``)."""
    out = []
    for op in PRESENT:
        if ops is not None and _key(op) not in ops and op.name not in ops:
            continue
        if op.name in RANDOM_SAMPLE or op.name in UNINITIALISED:
            continue
        for dtype in dtypes:
            if dtype not in op.supported_dtypes("cpu"):
                continue
            try:
                pool = _samples(op, dtype, False, POOL)
            except Exception:  # noqa: BLE001 - a generator that fails makes no case
                continue
            keyed = []
            for i, s in enumerate(pool):
                leaves = []
                skeleton = _structure((s.input, tuple(s.args), dict(s.kwargs)), leaves)
                if not leaves or any(t.layout != torch.strided or t.is_complex()
                                     for t in leaves):
                    keyed.append(None)
                    continue
                keyed.append((_kind(skeleton, leaves), Case(op, dtype, i, s, skeleton,
                                                            _arrays(leaves))))
            mine = [k for k in keyed[:samples] if k is not None]
            for kind, case in mine:
                for other in keyed:
                    if other is not None and other[0] == kind and other[1] is not case and \
                            any(a.shape != b.shape or not np.array_equal(a, b)
                                for a, b in zip(case.arrays, other[1].arrays)):
                        case.variants.append((f"sample {other[1].index}", other[1].arrays))
                case.variants.append(("other values", _other_values(case.arrays, case.index)))
                case.variants += [(f"grown {label}", arrays)
                                  for label, arrays in _variants(case.arrays)][:GROWN]
                out.append(case)
    return out


# ----- both sides' functions ---------------------------------------------------------------
def _functions(case):
    """(ember module, torch module) computing the op of the sample's tensors."""
    e_fn, t_fn = _ember_fn(case.op), case.op.op
    skeleton = case.skeleton
    e_skeleton = _to_ember(skeleton)

    class EmberOp(ember.nn.Module):
        def forward(self, *xs):
            x, args, kwargs = _rebuild(e_skeleton, xs)
            return e_fn(x, *args, **kwargs)

    class TorchOp(torch.nn.Module):
        def forward(self, *xs):
            x, args, kwargs = _rebuild(skeleton, xs)
            return t_fn(x, *args, **kwargs)
    return EmberOp(), TorchOp()


def _call(lib, fn, arrays):
    ctx = torch.no_grad() if lib is torch else ember.no_grad()
    with ctx:
        return fn(*[lib.from_numpy(a.copy()) for a in arrays])


def _eager(lib, fn, arrays):
    try:
        return _call(lib, fn, arrays)
    except Exception:  # noqa: BLE001 - a variant the op refuses is left out
        return None


def _trace(lib, mod, arrays):
    """(traced, warnings) or (exception, None)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            traced = lib.jit.trace(mod, tuple(lib.from_numpy(a.copy()) for a in arrays),
                                   check_trace=False)
        except Exception as ex:  # noqa: BLE001 - an outcome
            return ex, None
    category = TracerWarning if lib is ember else torch.jit.TracerWarning
    return traced, [str(w.message) for w in caught if issubclass(w.category, category)]


def _plain(out):
    """``out`` with sparse tensors made dense and the dtypes NumPy lacks widened
    (torch's bfloat16 and complex32), for :func:`same`."""
    if isinstance(out, (tuple, list)):
        return [_plain(o) for o in out]
    if isinstance(out, torch.Tensor):
        out = out.to_dense() if out.layout != torch.strided else out
        if out.dtype in (torch.bfloat16, torch.complex32):
            out = out.cfloat() if out.is_complex() else out.float()
        return out
    if isinstance(out, ember.Tensor):
        out = out.to_dense() if getattr(out, "layout", ember.strided) != ember.strided else out
        if out.dtype in (ember.bfloat16, ember.complex32):
            out = out.cfloat() if out.is_complex() else out.float()
        return out
    return out


def _same(a, b):
    return same(_plain(a), _plain(b))


def _replay(lib, traced, variants, pick):
    out = {}
    for v in variants:
        label, arrays, want = v[0], v[1], v[pick]
        try:
            out[label] = _same(_call(lib, traced, arrays), want)
        except Exception as ex:  # noqa: BLE001 - an outcome
            out[label] = _err(ex)
    return out


def _status(replays, warned):
    """``equal``; ``warned`` (a TracerWarning was emitted); ``raises at <variant>`` (a
    loud error at a variant eager accepts); ``silent at <variant>`` (other values)."""
    if all(r is True for r in replays.values()):
        return "equal"
    if warned:
        return "warned"
    bad = [(k, r) for k, r in replays.items() if r is not True]
    silent = [(k, r) for k, r in bad if r is False]
    if silent:
        return f"silent at {silent[0][0]}: different values"
    return f"raises at {bad[0][0]}: {bad[0][1]}"


# ----- one case ----------------------------------------------------------------------------
def run_case(case, onnx=True):
    """{"trace", "torch_trace", "load", "onnx", "variants"} outcomes of a case."""
    e_mod, t_mod = _functions(case)
    example_e = _eager(ember, e_mod, case.arrays)
    example_t = _eager(torch, t_mod, case.arrays)
    if example_e is None or example_t is None:
        return {"trace": "skip: eager raises at the sample"}
    variants = [("sample", case.arrays, example_e, example_t)]
    for label, arrays in case.variants:
        e, t = _eager(ember, e_mod, arrays), _eager(torch, t_mod, arrays)
        if e is not None and t is not None:
            variants.append((label, arrays, e, t))
    out = {"variants": len(variants) - 1}
    traced, e_warned = _trace(ember, e_mod, case.arrays)
    t_traced, t_warned = _trace(torch, t_mod, case.arrays)
    if t_warned is None:
        out["torch_trace"] = f"trace raises {_err(t_traced)}"
    else:
        out["torch_trace"] = _status(_replay(torch, t_traced, variants, 3), t_warned)
    if e_warned is None:
        out["trace"] = f"trace raises {_err(traced)}"
        return out
    e_replays = _replay(ember, traced, variants, 2)
    out["trace"] = _status(e_replays, e_warned)
    out["warns"] = (bool(e_warned), bool(t_warned))
    if out["torch_trace"] == "equal" and out["trace"] != "equal":
        out["trace"] = f"{out['trace']}; torch's trace generalises"
    elif out["torch_trace"] == "warned" and not e_warned and out["trace"] != "equal":
        out["trace"] = f"{out['trace']}; torch's trace warns"
    out["load"] = _loaded(traced, [v for v in variants if e_replays[v[0]] is True])
    if onnx:
        out["onnx"] = _onnx(e_mod, case.arrays, variants)
    return out


def _loaded(traced, variants):
    buf = io.BytesIO()
    try:
        ember.jit.save(traced, buf)
    except NotImplementedError as ex:
        return f"unspelled: {str(ex).splitlines()[0][:140]}"
    except Exception as ex:  # noqa: BLE001 - an outcome
        return f"save raises {_err(ex)}"
    buf.seek(0)
    try:
        loaded = torch.jit.load(buf)
    except Exception as ex:  # noqa: BLE001 - an outcome
        return f"torch.jit.load raises {_err(ex)}"
    if not variants:
        return "equal (nothing to run)"
    bad = {k: r for k, r in _replay(torch, loaded, variants, 3).items() if r is not True}
    if not bad:
        return "equal"
    label, r = next(iter(bad.items()))
    return f"differs at {label}: {'different values' if r is False else r}"


def _dynamic_axes(arrays, variants):
    """{input name: {axis: name}} for each axis whose size differs among the variants."""
    dyn = {}
    for i, a in enumerate(arrays):
        axes = {d: f"x{i}_{d}" for d in range(a.ndim)
                if any(v[1][i].shape[d] != a.shape[d] for v in variants)}
        if axes:
            dyn[f"x{i}"] = axes
    return dyn


def _onnx(e_mod, arrays, variants):
    names = [f"x{i}" for i in range(len(arrays))]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ember.onnx.export(e_mod, tuple(ember.from_numpy(a.copy()) for a in arrays), buf,
                              input_names=names, dynamic_axes=_dynamic_axes(arrays, variants))
        except ember.onnx.UnsupportedOnnxExport as ex:
            return f"unsupported: {str(ex).splitlines()[0][:100]}"
        except Exception as ex:  # noqa: BLE001 - an outcome
            return f"export raises {_err(ex)}"
    try:
        sess = ort.InferenceSession(buf.getvalue(), _QUIET,
                                    providers=["CPUExecutionProvider"])
    except Exception as ex:  # noqa: BLE001 - an outcome
        return f"onnxruntime rejects the file: {_err(ex)}"
    feeds = {i.name for i in sess.get_inputs()}
    for label, xs, want, _ in variants:
        feed = {nm: a for nm, a in zip(names, xs) if nm in feeds}
        try:
            got = sess.run(None, feed, _QUIET_RUN)
        except Exception as ex:  # noqa: BLE001 - an outcome
            return f"onnxruntime raises at {label}: {_err(ex)}"
        if not _same(got, want):
            return f"differs at {label}"
    return "equal"


def run_all(ops=None, onnx=True, dtypes=DTYPES, samples=SAMPLES):
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases(ops, dtypes, samples):
            try:
                results[case.name] = run_case(case, onnx)
            except Exception as ex:  # noqa: BLE001 - reported
                results[case.name] = {"trace": f"harness raises {_err(ex)}"}
    return results


if __name__ == "__main__":
    import sys
    import time
    t0 = time.time()
    res = run_all(sys.argv[1:] or None)
    for k, v in res.items():
        print(k, v)
    for stage in ("trace", "load", "onnx"):
        counts = {}
        for v in res.values():
            head = str(v.get(stage, "-")).split(":")[0].split(" at ")[0]
            counts[head] = counts.get(head, 0) + 1
        print(stage, dict(sorted(counts.items(), key=lambda kv: -kv[1])))
    print(f"{len(res)} cases in {time.time() - t0:.0f} s")
