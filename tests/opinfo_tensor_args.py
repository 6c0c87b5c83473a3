"""The OpInfo samples whose Python int arguments are given as 0-d integer tensors
(``x.topk(torch.tensor(2))``, ``x.sum(torch.tensor(0))``): torch takes a 0-d integer
tensor wherever it takes an int; ember must compute what torch computes, and refuse what
torch refuses with torch's error type. ``python tests/opinfo_tensor_args.py`` prints
every case; tests/test_opinfo_tensor_args.py asserts them against its KNOWN list."""
import warnings

import test_opinfo as T
import torch

SAMPLES = 4
PARTS = ("scalar", "list")
SKIP_OPS = set(T.RANDOM_SAMPLE)


def _is_int(v):
    return type(v) is int


def _swap(v, part):
    """``v`` with its ints (``scalar``: an int argument itself; ``list``: the ints inside
    a list or tuple argument) as 0-d int64 tensors, and whether anything changed."""
    if part == "scalar" and _is_int(v):
        return torch.tensor(v), True
    if part == "list" and isinstance(v, (list, tuple)) and not hasattr(v, "_fields") and \
            any(_is_int(x) for x in v):
        return type(v)(torch.tensor(x) if _is_int(x) else x for x in v), True
    return v, False


def variants(s, part):
    """One (args, kwargs) per int argument of the sample ``s`` replaced alone."""
    out = []
    for i, a in enumerate(s.args):
        v, changed = _swap(a, part)
        if changed:
            args = list(s.args)
            args[i] = v
            out.append((f"arg{i}", tuple(args), dict(s.kwargs)))
    for k, a in s.kwargs.items():
        v, changed = _swap(a, part)
        if changed:
            out.append((k, tuple(s.args), {**s.kwargs, k: v}))
    return out


def _outcome(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), None)``, or ``(None, the exception)``, warnings silenced."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - compared with the other side's
        return None, e


def run_case(op, part):
    """Compare every variant of the op's first samples; raise AssertionError on the first
    difference. Returns the number of variants compared."""
    key = T._key(op)
    fn = T._ember_fn(op)
    n = 0
    for i, s in enumerate(T._samples(op, T._dtypes(op)[0], False, SAMPLES)):
        if not isinstance(s.input, torch.Tensor) or s.input.layout != torch.strided:
            continue
        e_in = T._to_ember(s.input)
        for where, args, kw in variants(s, part):
            label = f"{key} {part} sample {i} {where}"
            # only calls whose int form works on both sides (the rest is other sweeps')
            if _outcome(op.op, s.input, *s.args, **s.kwargs)[1] is not None or \
                    _outcome(fn, e_in, *T._to_ember(s.args), **T._to_ember(s.kwargs))[1] \
                    is not None:
                continue
            t_out, t_err = _outcome(op.op, s.input, *args, **kw)
            e_out, e_err = _outcome(fn, e_in, *T._to_ember(args), **T._to_ember(kw))
            n += 1
            if t_err is not None:
                assert e_err is not None, \
                    f"{label}: torch raised {type(t_err).__name__}: {str(t_err)[:100]}; " \
                    "ember computed"
                assert isinstance(e_err, type(t_err)), \
                    f"{label}: torch raised {type(t_err).__name__}, ember " \
                    f"{type(e_err).__name__}: {str(e_err)[:100]}"
                continue
            assert e_err is None, f"{label}: ember raised {type(e_err).__name__}: {e_err}"
            t_flat, e_flat = T._flat(t_out), T._flat(e_out)
            assert len(e_flat) == len(t_flat), f"{label}: {len(e_flat)} results, torch's " \
                f"{len(t_flat)}"
            for j, (e, t) in enumerate(zip(e_flat, t_flat)):
                T._compare(e, t, key, f"{label} result {j}")
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
    print(f"ops {len(T.PRESENT)}, variants compared {n}, differing {len(fails)}, "
          f"{time.time() - t0:.0f}s")
    for k, v in sorted(fails.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    report()
