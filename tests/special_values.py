"""The special-value sweep: every OpInfo op on inputs holding NaN, +-inf, -0.0,
subnormals and the largest finite values, forward and first gradient, against torch.

Outputs are compared by class, element by element: NaN, +inf, -inf, +0.0, -0.0 or
finite. Finite values themselves are the plain OpInfo test's business (with these inputs
they are often ill-conditioned: the largest float times anything). Run as a script for
the counts and every difference; ``test_special_values.py`` asserts them.
"""
import sys
import threading
import warnings

import numpy as np
import torch
from test_opinfo import PRESENT, RANDOM_SAMPLE, _ember_fn, _flat, _key, _samples, _to_ember

import ember

SAMPLES = 6  # per op and dtype (the later samples carry reductions, weights, dims)
VERBOSE = False
# LAPACK's factorizations have no defined result on NaN/inf input: torch's MKL build
# prints "Parameter 3 was incorrect on entry to SGEBAL" and crashes the process on
# linalg.eigvals, so the linear-algebra family is left out of this sweep
LAPACK = ("linalg.", "cholesky", "lu", "qr", "svd", "eig", "det", "inverse", "pinverse",
          "logdet", "slogdet", "triangular_solve", "geqrf", "ormqr", "matrix_exp",
          "householder_product", "lstsq", "symeig", "ldl", "solve")


def _shallow(fn, *args):
    """``fn(*args)`` on a fresh thread, whose stack is shallow: OpInfo's sample iterator
    walks the whole stack (``inspect.stack``) on each call, and pytest's is deep."""
    box = []

    def run():
        try:
            box.append((True, fn(*args)))
        except BaseException as err:  # noqa: BLE001 - raised again on the caller's thread
            box.append((False, err))
    t = threading.Thread(target=run)
    t.start()
    t.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value


def specials(dtype):
    info = torch.finfo(dtype)
    return [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, info.tiny / 4,
            -info.tiny / 4, info.max, -info.max, 1.0, -1.0]


def inject(t, offset):
    """A copy of the float tensor ``t`` with special values spread over its elements."""
    vals = specials(t.dtype)
    out = t.detach().clone()
    flat = out.view(-1) if out.is_contiguous() else None
    if flat is None:
        return None
    for i in range(flat.numel()):
        if (i + offset) % 2 == 0:  # every other element, so ordinary values stay between
            flat[i] = vals[(i // 2 + offset) % len(vals)]
    return out.requires_grad_(t.requires_grad)


def classes(a):
    """Per element: 0 NaN, 1 +inf, 2 -inf, 3 +0, 4 -0, 5 finite nonzero."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        return np.stack([classes(a.real), classes(a.imag)])
    if a.dtype.kind != "f":
        return a  # integers and booleans: exact
    c = np.full(a.shape, 5, np.int8)
    c[a == 0] = 3
    c[(a == 0) & np.signbit(a)] = 4
    c[np.isposinf(a)] = 1
    c[np.isneginf(a)] = 2
    c[np.isnan(a)] = 0
    return c


def _arrays(outs):
    res = []
    for o in _flat(outs):
        if isinstance(o, (torch.Tensor, ember.Tensor)):
            if isinstance(o, torch.Tensor):
                if o.layout != torch.strided:
                    o = o.to_dense()
                if o.dtype in (torch.bfloat16, torch.float16):
                    o = o.float()
                if o.dtype == torch.complex32:  # no NumPy twin: compare in complex64
                    o = o.cfloat()
                res.append(o.detach().numpy(force=True))
            else:
                if getattr(o, "layout", ember.strided) != ember.strided:
                    o = o.to_dense()
                if o.dtype in (ember.bfloat16, ember.float16):
                    o = o.float()
                if o.dtype == ember.complex32:
                    o = o.cfloat()
                res.append(o.detach().numpy())
        else:
            res.append(np.asarray(o))
    return res


def _differs(e_arrs, t_arrs):
    if len(e_arrs) != len(t_arrs):
        return f"{len(e_arrs)} outputs != {len(t_arrs)}"
    for j, (a, b) in enumerate(zip(e_arrs, t_arrs)):
        if a.shape != b.shape:
            return f"output {j}: shape {a.shape} != {b.shape}"
        ca, cb = classes(a), classes(b)
        if ca.shape != cb.shape or not np.array_equal(ca, cb):
            names = np.array(["nan", "+inf", "-inf", "+0", "-0", "x"])
            bad = np.argwhere(ca != cb) if ca.shape == cb.shape else []
            if len(bad):
                i = tuple(bad[0])
                return (f"output {j} at {i}: ember {names[ca[i]] if a.dtype.kind in 'fc' else a[i]}"
                        f" torch {names[cb[i]] if b.dtype.kind in 'fc' else b[i]}")
            return f"output {j}: classes differ"
    return None


def check(op, dtype):
    """(cases compared, first difference or None) for ``op`` in ``dtype``."""
    fn = _ember_fn(op)
    grad = dtype == torch.float64 and op.supports_autograd
    compared = 0
    for i, s in enumerate(_shallow(_samples, op, dtype, grad)[:SAMPLES]):
        if not (isinstance(s.input, torch.Tensor) and s.input.dtype == dtype
                and s.input.numel() and s.input.layout == torch.strided):
            continue
        for offset in (0, 1):
            x = inject(s.input, offset)
            if x is None:
                continue
            where = f"{_key(op)} {str(dtype)[6:]} sample {i}/{offset}"
            e_x, e_args, e_kw = _to_ember(x), _to_ember(s.args), _to_ember(s.kwargs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    t_out = op.op(x, *s.args, **s.kwargs)
                except Exception:  # noqa: BLE001 - then ember must refuse too
                    try:
                        fn(e_x, *e_args, **e_kw)
                    except Exception:  # noqa: BLE001
                        compared += 1
                        continue
                    return compared, f"{where}: torch raised, ember did not"
                try:
                    e_out = fn(e_x, *e_args, **e_kw)
                except Exception as err:  # noqa: BLE001
                    return compared, f"{where}: ember raised {type(err).__name__}: {err}"[:300]
            compared += 1
            e_arrs, t_arrs = _arrays(e_out), _arrays(t_out)
            random = RANDOM_SAMPLE.get(op.name, lambda s: False)(s)
            if random:  # dropout draws from each library's own stream: shapes only
                e_arrs = [np.zeros_like(a) for a in e_arrs]
                t_arrs = [np.zeros_like(a) for a in t_arrs]
            diff = _differs(e_arrs, t_arrs)
            if diff:
                return compared, f"{where} forward: {diff}"
            if grad and not random:
                diff = _grad_differs(x, s, t_out, e_x, e_args, e_kw, e_out)
                compared += 1
                if diff:
                    return compared, f"{where} gradient: {diff}"
    return compared, None


def _grad_differs(x, s, t_out, e_x, e_args, e_kw, e_out):
    t_outs = [o for o in _flat(s.output_process_fn_grad(t_out))
              if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()]
    e_outs = [o for o, t in zip(_flat(s.output_process_fn_grad(e_out)),
                                _flat(s.output_process_fn_grad(t_out)))
              if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    if not t_outs or not x.requires_grad:
        return None
    if len(e_outs) != len(t_outs) or not all(getattr(o, "requires_grad", False)
                                             for o in e_outs):
        return "ember's output does not require grad"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tg = torch.autograd.grad(t_outs, [x], [torch.ones_like(o) for o in t_outs],
                                 allow_unused=True)[0]
        try:
            eg = ember.autograd.grad(e_outs, [e_x], [ember.ones_like(o) for o in e_outs],
                                     allow_unused=True)[0]
        except Exception as err:  # noqa: BLE001
            return f"ember raised {type(err).__name__}: {err}"[:300]
    if tg is None or eg is None:
        if (tg is None) != (eg is None):
            other = tg if eg is None else eg
            arr = other.detach().numpy()
            if arr.any() or np.isnan(arr).any():
                return "gradient None on one side"
        return None
    return _differs(_arrays(eg), _arrays(tg))


def sweep(ops=None):
    """{op key: first difference} and the number of cases compared."""
    diffs, total = {}, 0
    for op in ops or PRESENT:
        if op.name.startswith(LAPACK):
            continue
        dtypes = [d for d in (torch.float32, torch.float64) if d in op.supported_dtypes("cpu")]
        for dtype in dtypes:
            if VERBOSE:
                print(_key(op), dtype, file=sys.stderr, flush=True)
            try:
                n, diff = check(op, dtype)
            except Exception as err:  # noqa: BLE001 - a harness failure is a difference too
                n, diff = 1, f"harness: {type(err).__name__}: {err}"[:300]
            total += n
            if diff:
                diffs.setdefault(_key(op), diff)
    return diffs, total


if __name__ == "__main__":
    VERBOSE = True
    names = set(sys.argv[1:])
    found, n = sweep([op for op in PRESENT if not names or _key(op) in names])
    for k, v in sorted(found.items()):
        print(f"{k}: {v}")
    print(f"{n} cases compared, {len(found)} ops differ")
