"""PyTorch's ModuleInfo modules traced and exported at one shape, run at others.

For each module of ``module_db`` (tests/module_db_harness.py builds both sides and
converts the arguments) and its first samples whose forward takes tensors (nested in
tuples, or by keyword: a small wrapper module passes them on; float32; eval, and train
too for the modules whose forward depends on the mode), the
inputs are grown one dimension of one input at a time and jointly
(``trace_sweep._variants``); a variant that eager ember or eager torch rejects is a
size the module does not allow and is left out. Then:

1. ``ember.jit.trace`` and ``torch.jit.trace`` of the module at the sample's shapes run
   at every other variant; each trace must give its own eager module's result (to
   float32 rounding) or have emitted a ``TracerWarning``. Where torch's trace warns
   ember's must warn; where torch's generalises ember's must too.
2. ``ember.jit.save`` of ember's trace, read back by the real ``torch.jit.load``, runs
   at the example and at every variant where ember's trace generalises, against torch's
   eager module (the same ``state_dict``).
3. ``ember.onnx.export`` in eval mode with axis 0 of every input named ``batch`` runs in
   onnxruntime at the example and with axis 0 grown in every input that has it at the
   same size, against eager ember. An op ember has no ONNX spelling for raises
   ``UnsupportedOnnxExport``: counted as ``unsupported``.

``python tests/module_db_trace.py`` prints each case's outcome and the counts.
"""
import copy
import io
import warnings

import numpy as np
import onnxruntime as ort
import torch
from module_db_harness import _is_lazy, _load, build_ember, build_torch, infos, samples
from trace_sweep import _grown, _variants

import ember
import ember.onnx
from ember.jit import TracerWarning

ort.set_default_logger_severity(3)

# samples per module and mode
SAMPLES = 2
# modules whose forward depends on the mode: traced in train mode too (the table has no
# dropout module; FractionalMaxPool draws in both modes and is run seeded)
TRAIN_MATTERS = ("BatchNorm", "InstanceNorm", "Transformer", "MultiheadAttention", "RReLU")
# variants replayed per case (single dimensions first, then the joint ones)
MAX_VARIANTS = 6


def _structure(x, leaves):
    """``x`` with each tensor replaced by its index in ``leaves`` (appended there)."""
    if isinstance(x, torch.Tensor):
        leaves.append(x)
        return _Leaf(len(leaves) - 1)
    if isinstance(x, (tuple, list)):
        return type(x)(_structure(v, leaves) for v in x)
    if isinstance(x, dict):
        return {k: _structure(v, leaves) for k, v in x.items()}
    return x


class _Leaf:
    def __init__(self, i):
        self.i = i


def _rebuild(x, tensors):
    if isinstance(x, _Leaf):
        return tensors[x.i]
    if isinstance(x, (tuple, list)):
        return type(x)(_rebuild(v, tensors) for v in x)
    if isinstance(x, dict):
        return {k: _rebuild(v, tensors) for k, v in x.items()}
    return x


def _positional(lib, mod, structure):
    """``mod`` called with the sample's nesting and keywords from flat tensors (as a
    module of ``lib``, so that both traces and ``jit.save`` see one submodule); ``mod``
    itself where the sample passes its tensors positionally."""
    args, kwargs = structure
    if not kwargs and all(isinstance(a, _Leaf) for a in args):
        return mod

    class Positional(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = mod

        def forward(self, *xs):
            return self.inner(*_rebuild(args, xs), **_rebuild(kwargs, xs))
    return Positional()


def picked(info, training):
    """The first :data:`SAMPLES` samples whose forward takes tensors (nested in tuples
    or keywords too) and constants: ``(sample, structure, tensors)``."""
    out = []
    for s in samples(info, torch.float32, training):
        fwd = s.forward_input
        leaves = []
        kwargs = {k: v for k, v in fwd.kwargs.items() if v is not None}
        structure = (_structure(tuple(fwd.args), leaves), _structure(kwargs, leaves))
        if not leaves:
            continue
        out.append((s, structure, leaves))
        if len(out) == SAMPLES:
            break
    return out


def cases():
    """(case id, info, sample, training) for every module of the table."""
    out = []
    for name, info in sorted(infos().items()):
        modes = (False, True) if any(k in name for k in TRAIN_MATTERS) else (False,)
        for training in modes:
            for i, (s, structure, leaves) in enumerate(picked(info, training)):
                out.append((f"{name}/{'train' if training else 'eval'}/{i}:{s.desc}",
                            info, (s, structure, leaves), training))
    return out


# ----- comparisons -----------------------------------------------------------------------
def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if out is None or isinstance(out, (int, float, bool)):
        return []
    return [out]


def _arrays(out):
    return [np.asarray(o.detach().numpy()) if hasattr(o, "detach") else np.asarray(o)
            for o in _flat(out)]


def same(a, b):
    """Outputs equal in shape and (to float32 rounding) in value."""
    fa, fb = _arrays(a), _arrays(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if x.shape != y.shape:
            return False
        if x.dtype.kind in "fc":
            finite = np.abs(x[np.isfinite(x)])
            scale = max(1.0, float(finite.max()) if finite.size else 1.0)
            if not np.allclose(x, y, rtol=1e-4, atol=1e-5 * scale, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def _call(lib, fn, arrays):
    lib.manual_seed(0)
    ctx = torch.no_grad() if lib is torch else ember.no_grad()
    with ctx:
        return fn(*[lib.from_numpy(a.copy()) for a in arrays])


def _eager(lib, mod, arrays):
    """The module's result on fresh copies (train mode changes running statistics), or
    None where it raises."""
    try:
        return _call(lib, copy.deepcopy(mod), arrays)
    except Exception:
        return None


def _allowed(e_mod, t_mod, arrays):
    """[(label, arrays, ember eager, torch eager)] of the variants both sides accept."""
    out = []
    singles = []
    for label, grown in _variants(arrays):
        e, t = _eager(ember, e_mod, grown), _eager(torch, t_mod, grown)
        if e is not None and t is not None:
            out.append((label, grown, e, t))
            if isinstance(label[0], int):
                singles.append(label)
    if len(singles) > 1:
        joint = list(arrays)
        for i, d in singles:
            joint = _grown(joint, i, d)
        e, t = _eager(ember, e_mod, joint), _eager(torch, t_mod, joint)
        if e is not None and t is not None:
            out.append(("all", joint, e, t))
    return out[:MAX_VARIANTS - 1] + out[-1:] if len(out) > MAX_VARIANTS else out


def _err(ex):
    return f"{type(ex).__name__}: {str(ex).splitlines()[0][:140] if str(ex) else ''}"


def _trace(lib, mod, arrays):
    """(traced, warned) or (exception, None)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            lib.manual_seed(0)
            traced = lib.jit.trace(copy.deepcopy(mod),
                                   tuple(lib.from_numpy(a.copy()) for a in arrays),
                                   check_trace=False)
        except Exception as ex:
            return ex, None
    category = TracerWarning if lib is ember else torch.jit.TracerWarning
    return traced, [str(w.message) for w in caught if issubclass(w.category, category)]


def _replay(lib, traced, variants, pick):
    """{label: True (equal) / False (differs) / error text} at every variant."""
    out = {}
    for v in variants:
        label, arrays, want = v[0], v[1], v[pick]
        try:
            out[label] = same(_call(lib, traced, arrays), want)
        except Exception as ex:
            out[label] = _err(ex)
    return out


def _status(replays, warned):
    if all(r is True for r in replays.values()):
        return "equal"
    if warned:
        return "warned"
    bad = [(k, r) for k, r in replays.items() if r is not True]
    label, r = bad[0]
    return f"silent at {label}: {'different values' if r is False else r}"


# ----- one case --------------------------------------------------------------------------
def run_case(info, sample, training):
    """{"trace": ..., "torch_trace": ..., "load": ..., "onnx": ...} outcomes of a case."""
    sample, structure, leaves = sample
    arrays = [a.detach().numpy().copy() for a in leaves]
    t_inner = build_torch(info, sample, torch.float32, training)
    e_inner = build_ember(info, sample, torch.float32, training, {})
    t_mod = _positional(torch, t_inner, structure)
    e_mod = _positional(ember, e_inner, structure)
    if _is_lazy(t_inner):
        _call(torch, t_mod, arrays)
        _call(ember, e_mod, arrays)
    _load(e_inner, t_inner)
    example_e, example_t = _eager(ember, e_mod, arrays), _eager(torch, t_mod, arrays)
    if example_e is None or example_t is None:
        return {"trace": "skip: eager raises at the example"}
    variants = [("example", arrays, example_e, example_t)] + _allowed(e_mod, t_mod, arrays)
    out = {"variants": len(variants) - 1}

    traced, e_warned = _trace(ember, e_mod, arrays)
    t_traced, t_warned = _trace(torch, t_mod, arrays)
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
    if out["torch_trace"] == "warned" and out["trace"] == "equal" and not e_warned:
        out["trace"] = "generalises where torch's trace warns"
    if out["torch_trace"] == "equal" and out["trace"] != "equal":
        out["trace"] = f"{out['trace']}; torch's trace generalises"
    out["load"] = _loaded(traced, [v for v in variants if e_replays[v[0]] is True])
    if not training:
        out["onnx"] = _onnx(e_mod, t_mod, arrays)
    return out


def _loaded(traced, variants):
    buf = io.BytesIO()
    try:
        ember.jit.save(traced, buf)
    except NotImplementedError as ex:
        # an op of the trace has no TorchScript spelling: a clear error, naming it
        return f"unspelled: {str(ex).splitlines()[0][:140]}"
    except Exception as ex:
        return f"save raises {_err(ex)}"
    buf.seek(0)
    try:
        loaded = torch.jit.load(buf)
    except Exception as ex:
        return f"torch.jit.load raises {_err(ex)}"
    bad = {k: r for k, r in _replay(torch, loaded, variants, 3).items() if r is not True}
    if not bad:
        return "equal"
    label, r = next(iter(bad.items()))
    return f"differs at {label}: {'different values' if r is False else r}"


def _batch_variant(e_mod, t_mod, arrays):
    n = [a.shape[0] for a in arrays if a.ndim]
    if not n:
        return None
    grown = list(arrays)
    for j, a in enumerate(arrays):
        if a.ndim and a.shape[0] == n[0]:
            grown = _grown(grown, j, 0)
    e = _eager(ember, e_mod, grown)
    return None if e is None else grown


def _onnx(e_mod, t_mod, arrays):
    names = [f"x{i}" for i in range(len(arrays))]
    dyn = {nm: {0: "batch"} for nm, a in zip(names, arrays) if a.ndim}
    buf = io.BytesIO()
    mod = copy.deepcopy(e_mod)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ember.onnx.export(mod, tuple(ember.from_numpy(a.copy()) for a in arrays), buf,
                              input_names=names, dynamic_axes=dyn)
        except ember.onnx.UnsupportedOnnxExport as ex:
            return f"unsupported: {str(ex).splitlines()[0][:100]}"
        except Exception as ex:
            return f"export raises {_err(ex)}"
    try:
        sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    except Exception as ex:
        return f"onnxruntime rejects the file: {_err(ex)}"
    runs = [("example", arrays)]
    grown = _batch_variant(e_mod, t_mod, arrays)
    if grown is not None:
        runs.append(("batch", grown))
    for label, xs in runs:
        want = _eager(ember, e_mod, xs)
        feed = {nm: a for nm, a in zip(names, xs)}
        try:
            got = sess.run(None, {i.name: feed[i.name] for i in sess.get_inputs()})
        except Exception as ex:
            return f"onnxruntime raises at {label}: {_err(ex)}"
        if not same(got, want):
            return f"differs at {label}"
    return "equal" if len(runs) > 1 else "equal (no other batch)"


def run_all(selected=None):
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, info, sample, training in cases():
            if selected and not any(key.startswith(s) for s in selected):
                continue
            try:
                results[key] = run_case(info, sample, training)
            except Exception as ex:
                results[key] = {"trace": f"harness raises {_err(ex)}"}
    return results


if __name__ == "__main__":
    import sys
    import time
    t0 = time.time()
    res = run_all(sys.argv[1:])
    for k, v in res.items():
        print(k, v)
    print(f"{len(res)} cases in {time.time() - t0:.0f} s")
