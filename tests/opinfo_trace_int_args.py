"""``jit.trace`` of the OpInfo samples whose int arguments are given as 0-d integer tensors
(the variants of tests/opinfo_tensor_args.py), traced at the sample's value and called
at another: where PyTorch's trace follows the value (it records ``aten::Int`` of the
tensor), ember's must give eager's answer at the other value; where it keeps the
example's value, ember's trace may follow it or must say it keeps it (a
``TracerWarning`` naming the function), never answer the example's result silently.
``python tests/opinfo_trace_int_args.py`` prints every case that differs;
tests/test_opinfo_trace_int_args.py asserts them against its KNOWN list."""
import warnings

import numpy as np
import test_opinfo as T
import torch
from opinfo_tensor_args import SKIP_OPS, _outcome, variants

import ember

SAMPLES = 3
PARTS = ("scalar", "list")


def _others(v):
    return [x for x in (v - 1, v + 1, 0, 1, -1, v + 2) if x != v]


def _is_k(a):
    return isinstance(a, (torch.Tensor, ember.Tensor)) and a.ndim == 0 and \
        str(a.dtype).endswith("int64")


def _put(args, kw, where, value):
    """The variant's (args, kwargs) with its (first) 0-d tensor argument at ``where``
    replaced by ``value``."""
    def swap(a):
        if _is_k(a):
            return value
        if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
            i = next(j for j, x in enumerate(a) if _is_k(x))
            return type(a)(value if j == i else x for j, x in enumerate(a))
        return a
    if where.startswith("arg"):
        i = int(where[3:])
        args = list(args)
        args[i] = swap(args[i])
        return tuple(args), kw
    return args, {**kw, where: swap(kw[where])}


def _replace(m, args, kw, where, k):
    return _put(args, kw, where, m.tensor(k))


def _value(args, kw, where):
    a = args[int(where[3:])] if where.startswith("arg") else kw[where]
    if _is_k(a):
        return int(a)
    return next(int(x) for x in a if _is_k(x))


def _same(a, b):
    fa, fb = T._flat(a), T._flat(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        x = x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)
        y = y.detach().numpy() if hasattr(y, "detach") else np.asarray(y)
        if x.shape != y.shape or not np.allclose(x.astype(np.complex128),
                                                 y.astype(np.complex128),
                                                 rtol=1e-5, atol=1e-6, equal_nan=True):
            return False
    return True


def _traced(m, fn, inp, args, kw, where, k0):
    """A trace of ``fn`` with the variant's 0-d tensor as its second input, at ``k0``,
    and whether the trace warned that it kept a value."""
    def call(x, k):
        a, w = _put(args, kw, where, k)
        return fn(x, *a, **w)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tr = m.jit.trace(call, (inp, m.tensor(k0)), check_trace=False)
    warned = any(issubclass(w.category, m.jit.TracerWarning) and
                 ("traced tensor" in str(w.message) or "Converting a tensor" in
                  str(w.message)) for w in seen)
    return tr, warned


def _follows(m, fn, inp, args, kw, where, k0, k1):
    """(eager at k1 works, the trace at k0 called at k1 gives eager's answer, it warned),
    or None where the trace itself fails."""
    r1, e1 = _outcome(fn, inp, *_replace(m, args, kw, where, k1)[0],
                      **_replace(m, args, kw, where, k1)[1])
    r0, _ = _outcome(fn, inp, *_replace(m, args, kw, where, k0)[0],
                     **_replace(m, args, kw, where, k0)[1])
    if e1 is not None or _same(r0, r1):
        return None  # (no other value to tell following from keeping)
    try:
        tr, warned = _traced(m, fn, inp, args, kw, where, k0)
    except Exception as e:  # noqa: BLE001 - reported
        return ("trace raised", type(e).__name__, str(e)[:100])
    got, err = _outcome(tr, inp, m.tensor(k1))
    if err is not None:
        return ("replay raised", type(err).__name__, str(err)[:100], warned)
    return ("follows" if _same(got, r1) else "keeps", warned)


def run_case(op, part):
    """Check every variant of the op's first samples; raise AssertionError on the first
    that ember's trace gets wrong. Returns the number of variants checked."""
    key = T._key(op)
    fn = T._ember_fn(op)
    n = 0
    for i, s in enumerate(T._samples(op, T._dtypes(op)[0], False, SAMPLES)):
        if not isinstance(s.input, torch.Tensor) or s.input.layout != torch.strided:
            continue
        e_in = T._to_ember(s.input)
        for where, args, kw in variants(s, part):
            label = f"{key} {part} sample {i} {where}"
            if _outcome(fn, e_in, *T._to_ember(args), **T._to_ember(kw))[1] is not None:
                continue  # (eager's own sweep's business)
            e_args, e_kw = T._to_ember(args), T._to_ember(kw)
            try:
                k0 = _value(args, kw, where)
                _value(e_args, e_kw, where)
            except StopIteration:
                continue  # (a torch.Size reads its tensors back as ints)
            for k1 in _others(k0):
                mine = _follows(ember, fn, e_in, e_args, e_kw, where, k0, k1)
                if mine is not None:
                    break
            else:
                continue
            n += 1
            if mine[0] == "follows":
                continue
            assert mine[0] != "trace raised", f"{label}: {mine}"
            theirs = _follows(torch, op.op, s.input, args, kw, where, k0, k1)
            if mine[0] == "keeps":
                assert mine[1], f"{label}: ember's trace keeps the value {k0} at {k1} " \
                    "silently"
                assert theirs is None or theirs[0] != "follows", \
                    f"{label}: ember's trace keeps {k0} (it warns), torch's follows {k1}"
            else:
                assert mine[-1] or theirs is None or theirs[0] != "follows", \
                    f"{label}: ember's replay raised {mine[1:3]}, torch's trace follows"
    return n


def cases():
    return [(op, part) for op in T.PRESENT if op.name not in SKIP_OPS for part in PARTS]


def report():
    import time
    t0 = time.time()
    fails, n = {}, 0
    for op, part in cases():
        try:
            n += run_case(op, part)
        except Exception as e:  # noqa: BLE001 - a report of every difference
            fails[(T._key(op), part)] = f"{type(e).__name__}: {str(e)[:300]}"
    print(f"ops {len(T.PRESENT)}, variants checked {n}, differing {len(fails)}, "
          f"{time.time() - t0:.0f}s")
    for k, v in sorted(fails.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    report()
