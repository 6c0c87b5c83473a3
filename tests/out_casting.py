"""The ``out=`` sweep: every OpInfo op that takes ``out=``, with an ``out`` tensor of each
dtype, against torch.

For each op, the first sample of its first supported dtype among float32, int64, bool
and complex64 runs once without ``out`` in torch (for the result's shapes and dtypes),
then with ``out`` tensors of the right shape whose first one takes each dtype in
``DTYPES`` (the others keep the result's dtypes): ember must accept where torch accepts,
writing torch's values, and refuse where torch refuses, with the same builtin exception
type and, where torch says the result "can't be cast" to ``out``'s dtype, a message
saying so. One more case per op passes ``out`` tensors of the result's dtypes but a
wrong nonzero shape: both must resize them and warn that they did (torch's
"An output with one or more elements was resized"). Run as a script for the counts and
every difference; ``test_out_casting.py`` asserts them.
"""
import sys
import warnings

import numpy as np
import torch
from special_empty import _error_type
from special_values import _shallow
from test_opinfo import PRESENT, SIGN_FREE, _ember_fn, _flat, _key, _samples, _to_ember

import ember

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "float32", "float64", "complex64"]
SAMPLE_DTYPES = (torch.float32, torch.int64, torch.bool, torch.complex64)


def first_sample(op):
    """(dtype, sample) for ``op``'s first usable sample, or None."""
    for dt in SAMPLE_DTYPES:
        if dt in op.supported_dtypes("cpu"):
            for s in _shallow(_samples, op, dt, False)[:3]:
                if isinstance(s.input, torch.Tensor) and s.input.layout == torch.strided:
                    return dt, s
    return None


def _outs(lib, results, first_dtype, shape=None):
    """Fresh ``out`` tensors like torch's ``results``: the first of ``first_dtype``."""
    made = []
    for j, r in enumerate(results):
        dt = first_dtype if j == 0 and first_dtype else str(r.dtype).split(".")[1]
        made.append(lib.zeros(shape if shape is not None else tuple(r.shape),
                              dtype=getattr(lib, dt)))
    return made[0] if len(made) == 1 else tuple(made)


def _values(o):
    o = o.detach()
    if str(o.dtype).split(".")[1] in ("float16", "bfloat16"):
        o = o.float()
    return np.asarray(o.numpy() if isinstance(o, ember.Tensor) else o.numpy())


def run(lib, fn, s, results, first_dtype, shape=None):
    """("ok", [(dtype, values)], resized warned) or ("raise", type, message, False)."""
    inp, args, kwargs = (s.input, s.args, s.kwargs) if lib is torch else \
        _to_ember((s.input, s.args, s.kwargs))
    out = _outs(lib, results, first_dtype, shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(inp, *args, **kwargs, out=out)
        except Exception as err:  # noqa: BLE001 - a refusal is a result
            return ("raise", _error_type(err), str(err).split("\n")[0][:200], False)
    resized = any("resized" in str(w.message) for w in caught)
    return ("ok", [(str(o.dtype).split(".")[1], tuple(o.shape), _values(o))
                   for o in _flat(out)], resized)


def differs(mine, ref, values=True):
    """How ember's outcome differs from torch's, or None (``values``: compare them too;
    eigen/singular vectors are defined up to sign, so only their shapes are)."""
    if mine[0] != ref[0]:
        return (f"ember {mine[0]} ({mine[2] if mine[0] == 'raise' else ''}), "
                f"torch {ref[0]} ({ref[2] if ref[0] == 'raise' else ''})")
    if ref[0] == "raise":
        if mine[1] != ref[1]:
            return f"ember raises {mine[1]} ({mine[2]}), torch {ref[1]} ({ref[2]})"
        if "can't be cast" in ref[2] and "can't be cast" not in mine[2]:
            return f"message {mine[2]!r}, torch {ref[2]!r}"
        return None
    if mine[2] != ref[2]:
        return f"resize warning: ember {mine[2]}, torch {ref[2]}"
    for (da, sa, va), (db, sb, vb) in zip(mine[1], ref[1]):
        if (da, sa) != (db, sb):
            return f"out {da}{list(sa)}, torch {db}{list(sb)}"
        a, b = va.astype(np.complex128), vb.astype(np.complex128)
        if values and not np.allclose(a, b, rtol=1e-3, atol=1e-5, equal_nan=True):
            return f"values differ: {va.ravel()[:4]} vs {vb.ravel()[:4]}"
    return None


def cases(op):
    """Yield (label, torch outcome, ember outcome) for every case of ``op``."""
    got = first_sample(op)
    if got is None:
        return
    dt, s = got
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            results = [r for r in _flat(op.op(s.input, *s.args, **s.kwargs))
                       if isinstance(r, torch.Tensor)]
        except Exception:  # noqa: BLE001 - a sample torch refuses: nothing to write
            return
    if not results:
        return
    fn = _ember_fn(op)
    name = f"{_key(op)}({str(dt)[6:]})"
    for out_dt in DTYPES:
        yield (f"{name} out={out_dt}", run(torch, op.op, s, results, out_dt),
               run(ember, fn, s, results, out_dt))
    wrong = (3,) if tuple(results[0].shape) == (7,) else (7,)
    yield (f"{name} out of shape {list(wrong)}", run(torch, op.op, s, results, None, wrong),
           run(ember, fn, s, results, None, wrong))


OPS = [op for op in PRESENT if op.supports_out]


def sweep(ops=None):
    """(cases compared, equal, {op key: [differences]})."""
    compared = equal = 0
    diffs = {}
    for op in ops or OPS:
        try:
            for label, ref, mine in cases(op):
                compared += 1
                d = differs(mine, ref, op.name not in SIGN_FREE)
                if d is None:
                    equal += 1
                else:
                    diffs.setdefault(_key(op), []).append(f"{label}: {d}")
        except Exception as err:  # noqa: BLE001 - a harness failure is a difference
            compared += 1
            diffs.setdefault(_key(op), []).append(f"harness: {type(err).__name__}: {err}")
    return compared, equal, diffs


if __name__ == "__main__":
    names = set(a for a in sys.argv[1:] if not a.startswith("-"))
    n, eq, found = sweep([op for op in OPS if not names or _key(op) in names])
    for k, v in sorted(found.items()):
        for line in v if "-a" in sys.argv else v[:1]:
            print(f"{k}: {line}"[:300])
    print(f"{n} cases compared, {eq} equal, {sum(map(len, found.values()))} differ "
          f"in {len(found)} ops")
