"""The zero-size sweep: every OpInfo op on zero-size variants of its first samples,
forward and first gradient, against torch.

Each sample whose input is a float tensor (or a list of them) gets up to two variants:
its first dim shrunk to 0 and, for inputs of two or more dims, its last dim shrunk to 0;
tensor arguments of the input's rank and size along that dim shrink with it, so
``add(x, y)`` stays a valid pair. Both float64 (with the gradient) and float32 (the same
samples cast) run. ember must raise where torch raises, with the same builtin exception
type, and otherwise return outputs of torch's number, shapes, dtypes and value classes
(NaN, +-inf, +-0, finite: reductions over nothing give numbers).

Some torch kernels kill the process on empty input (SIGFPE from an integer division by
the element count), so each case runs in a forked child: one child per batch of ops,
which reports every case as it goes; when a child dies, the case it was running is run
again alone, and a torch death there is recorded as torch refusing (ember must raise).
Run as a script for the counts and every difference; ``test_special_empty.py`` asserts
them.
"""
import builtins
import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import warnings

import numpy as np
import torch
from special_values import _arrays, classes
from test_opinfo import PRESENT, _ember_fn, _flat, _key, _samples, _to_ember

import ember

SAMPLES = 2  # per op
WORKERS = 2  # batch children run at once
BATCH = 40  # ops per batch child
TIMEOUT = 60.0  # seconds without a report before a child counts as hung
VERBOSE = False
# ops whose new elements are uninitialised memory: shapes and dtypes only
UNINITIALISED = {"resize_", "resize_as_"}


def _shrink(v, ref_ndim, ref_size, dim, to32):
    """``v`` (any sample argument) with tensors aligned to the shrunk dim shrunk too."""
    if isinstance(v, torch.Tensor):
        if v.layout != torch.strided:
            return v
        t = v.detach()
        # only operands of the input's rank: a lower-rank one (a weight, running
        # statistics) keeps its size, as it is per channel rather than per element
        if t.dim() == ref_ndim and t.shape[dim] == ref_size:
            t = t.narrow(dim, 0, 0)
        if to32 and t.dtype == torch.float64:
            t = t.float()
        return t.clone().requires_grad_(v.requires_grad and not to32)
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return type(v)(_shrink(a, ref_ndim, ref_size, dim, to32) for a in v)
    if isinstance(v, dict):
        return {k: _shrink(a, ref_ndim, ref_size, dim, to32) for k, a in v.items()}
    return v


def variants(s, to32):
    """[(input, args, kwargs, what)]: the zero-size variants of the sample ``s``."""
    inp = s.input
    tensors = [inp] if isinstance(inp, torch.Tensor) else \
        list(inp) if isinstance(inp, (list, tuple)) else []
    if not tensors or not all(isinstance(t, torch.Tensor) and t.layout == torch.strided
                              and t.dtype == torch.float64 for t in tensors):
        return []
    ref = tensors[0]
    if ref.dim() == 0 or ref.numel() == 0:
        return []
    dims = [0] + ([ref.dim() - 1] if ref.dim() >= 2 else [])
    out = []
    for d in dims:
        args = (_shrink(v, ref.dim(), ref.shape[d], d, to32) for v in (inp, s.args, s.kwargs))
        out.append((*args, f"dim {d} of {tuple(ref.shape)} -> 0"))
    return out


def _error_type(err):
    """The builtin exception class ``err`` is (torch's own errors derive from them)."""
    for cls in type(err).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return "RuntimeError" if cls is NotImplementedError else cls.__name__
    return type(err).__name__


def _describe(outs):
    """Picklable: [(dtype name, shape, value classes)] of the outputs ``outs``."""
    dts = [str(o.dtype).split(".")[-1] if hasattr(o, "dtype") else type(o).__name__
           for o in _flat(outs)]
    return [(d, a.shape, classes(a)) for d, a in zip(dts, _arrays(outs))]


def _leaves(x):
    return [t for t in _flat(x) if getattr(t, "requires_grad", False)]


def run_side(lib, fn, inp, args, kwargs, s, values=True):
    """(forward, gradient) descriptions for one library: ``("raise", type, message)`` or
    ``("ok", outputs)``; the gradient (of the summed outputs, for the input) is None
    when there is none to take."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(inp, *args, **kwargs)
            fwd = ("ok", [(d, sh, c if values else None) for d, sh, c in _describe(out)])
        except Exception as err:  # noqa: BLE001 - a refusal is a result
            return ("raise", _error_type(err), str(err).split("\n")[0][:200]), None
        leaves = _leaves(inp)
        if not leaves:
            return fwd, None
        try:
            outs = [o for o in _flat(s.output_process_fn_grad(out))
                    if getattr(o, "requires_grad", False) and o.dtype.is_floating_point]
        except Exception as err:  # noqa: BLE001
            return fwd, ("raise", _error_type(err), str(err)[:200])
        if not outs:
            return fwd, None
        try:
            gs = lib.autograd.grad(outs, leaves, [lib.ones_like(o) for o in outs],
                                   allow_unused=True)
            gs = [lib.zeros_like(v) if g is None else g for g, v in zip(gs, leaves)]
            return fwd, ("ok", _describe(gs))
        except Exception as err:  # noqa: BLE001
            return fwd, ("raise", _error_type(err), str(err).split("\n")[0][:200])


def differs(mine, ref):
    """The first way ember's description differs from torch's, or None."""
    if ref is None or mine is None:
        return None if (ref is None) == (mine is None) or ref is None else \
            "ember has no gradient"
    if ref[0] == "crash":
        return None if mine[0] == "raise" else f"torch dies ({ref[1]}), ember returns"
    if ref[0] == "raise":
        if mine[0] != "raise":
            return f"torch raises {ref[1]} ({ref[2]}), ember returns"
        return None if mine[1] == ref[1] else \
            f"ember raises {mine[1]} ({mine[2]}), torch {ref[1]} ({ref[2]})"
    if mine[0] == "raise":
        return f"ember raises {mine[1]}: {mine[2]}"
    a, b = mine[1], ref[1]
    if len(a) != len(b):
        return f"{len(a)} outputs, torch {len(b)}"
    for j, ((da, sa, ca), (db, sb, cb)) in enumerate(zip(a, b)):
        if sa != sb:
            return f"output {j}: shape {sa}, torch {sb}"
        if da != db:
            return f"output {j}: dtype {da}, torch {db}"
        if ca is not None and (ca.shape != cb.shape or not np.array_equal(ca, cb)):
            return f"output {j}: values {ca.ravel()[:6]}, torch {cb.ravel()[:6]} (classes)"
    return None


def cases(op):
    """Yield (case id, input, args, kwargs, sample, grad) for ``op``, deterministically."""
    grad = op.supports_autograd
    dtypes = op.supported_dtypes("cpu")
    if torch.float64 not in dtypes:
        return
    for i, s in enumerate(_samples(op, torch.float64, grad)[:SAMPLES]):
        for to32 in (False, True):
            if to32 and torch.float32 not in dtypes:
                continue
            for j, (inp, args, kwargs, what) in enumerate(variants(s, to32)):
                cid = f"{_key(op)} {'float32' if to32 else 'float64'} sample {i}/{j}"
                yield cid, inp, args, kwargs, s, f"{cid} ({what})"


def _child(conn, ops, skip, only):
    """A batch child: run the cases of ``ops`` (bar ``skip``), reporting as it goes."""
    faulthandler.disable()  # a torch death here is a result, not a traceback to print
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)  # torch's kernels print before they die
    torch.set_num_threads(1)
    # a fresh thread has a shallow stack: OpInfo's sample iterator walks the whole stack
    # (inspect.stack, reading source lines) on each call, and a child forked under
    # pytest inherits pytest's deep one (13x slower)
    worker = threading.Thread(target=_work, args=(conn, ops, skip, only))
    worker.start()
    worker.join()


def _work(conn, ops, skip, only):
    for op in ops:
        fn = _ember_fn(op)
        try:
            for cid, inp, args, kwargs, s, where in cases(op):
                if cid in skip or (only is not None and cid != only):
                    continue
                conn.send(("start", cid))
                values = op.name not in UNINITIALISED
                ref = run_side(torch, op.op, inp, args, kwargs, s, values)
                conn.send(("torch", cid))
                if only is not None:
                    conn.send(("alive", cid))
                    return
                mine = run_side(ember, fn, *_to_ember((inp, args, kwargs)), s, values)
                conn.send(("done", cid, _key(op), where, differs(mine[0], ref[0]),
                           differs(mine[1], ref[1]), mine[1] is not None))
        except Exception as err:  # noqa: BLE001 - the op's samples themselves failed
            conn.send(("harness", _key(op), f"{type(err).__name__}: {err}"[:300]))
    conn.send(("end",))


def _spawn(ops, skip, only=None):
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(send, ops, skip, only), daemon=True)
    p.start()
    send.close()
    return p, recv


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"exit {code}"


def _isolated(op, cid):
    """Run torch's side of one case alone: the signal it dies of, or None."""
    p, conn = _spawn([op], set(), only=cid)
    alive = False
    while conn.poll(TIMEOUT):
        try:
            msg = conn.recv()
        except EOFError:
            break
        alive = alive or msg[0] == "alive"
    p.join(TIMEOUT)
    if p.is_alive():
        p.kill()
        p.join()
        return "hang"
    return None if alive else _signal_name(p.exitcode)


class Result:
    """The sweep's tallies."""

    def __init__(self):
        self.compared = self.equal = 0
        self.diffs = {}  # op key: first difference
        self.crashes = {}  # op key: (signal, case) where torch's process died
        self.differing = 0
        self.all = []  # every difference

    def add(self, msg):
        _, cid, key, where, fwd, grad, has_grad = msg
        for kind, diff in (("forward", fwd), ("gradient", grad)):
            if kind == "gradient" and not has_grad:
                continue
            self.compared += 1
            if diff is None:
                self.equal += 1
            else:
                self.differing += 1
                self.diffs.setdefault(key, f"{where} {kind}: {diff}")
                self.all.append(f"{where} {kind}: {diff}")


def sweep(ops=None):
    """Run every case of ``ops`` (default: every present OpInfo op); a ``Result``."""
    ops = list(ops or PRESENT)
    res = Result()
    pending = [(ops[i:i + BATCH], set()) for i in range(0, len(ops), BATCH)]
    running = []
    while pending or running:
        while pending and len(running) < WORKERS:
            batch, skip = pending.pop(0)
            p, conn = _spawn(batch, skip)
            running.append([p, conn, batch, set(skip), None, False])
        ready = multiprocessing.connection.wait([r[1] for r in running], TIMEOUT)
        if not ready:  # every child silent for TIMEOUT: the first is hung
            ready = [running[0][1]]
            running[0][0].kill()
        for conn in ready:
            r = next(r for r in running if r[1] is conn)
            p, _, batch, done, current, in_torch = r
            try:
                msg = conn.recv() if p.is_alive() or conn.poll() else None
            except EOFError:
                msg = None
            if msg and msg[0] == "start":
                r[4], r[5] = msg[1], True
                if VERBOSE:
                    print(msg[1], file=sys.stderr, flush=True)
            elif msg and msg[0] == "torch":
                r[5] = False
            elif msg and msg[0] == "done":
                done.add(msg[1])
                r[4] = None
                res.add(msg)
            elif msg and msg[0] == "harness":
                res.diffs.setdefault(msg[1], f"harness: {msg[2]}")
            if msg and msg[0] != "end":
                continue
            # the child ended or died: account for the case it was running
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
            running.remove(r)
            conn.close()
            if msg is None and current is not None:
                key = current.rsplit(" ", 3)[0]
                op = next(o for o in batch if _key(o) == key)
                if in_torch:
                    sig = _isolated(op, current)
                    sig = sig or _signal_name(p.exitcode)
                    res.crashes.setdefault(key, (sig, current))
                    res.add(_crash_case(op, current, sig))
                else:
                    res.compared += 1
                    res.differing += 1
                    res.diffs.setdefault(key, f"{current}: ember's process died "
                                              f"({_signal_name(p.exitcode)})")
                done.add(current)
                pending.insert(0, (batch, done))
    return res


def _crash_case(op, cid, sig):
    """A torch death counts as torch refusing: ember must raise (forward only)."""
    fn = _ember_fn(op)
    for c, inp, args, kwargs, s, where in cases(op):
        if c == cid:
            mine = run_side(ember, fn, *_to_ember((inp, args, kwargs)), s)
            return ("done", cid, _key(op), where, differs(mine[0], ("crash", sig)), None,
                    False)
    raise LookupError(cid)


if __name__ == "__main__":
    VERBOSE = "-v" in sys.argv
    names = set(a for a in sys.argv[1:] if not a.startswith("-"))
    import time
    t0 = time.time()
    r = sweep([op for op in PRESENT if not names or _key(op) in names])
    for line in r.all if "-a" in sys.argv else sorted(f"{k}: {v}" for k, v in r.diffs.items()):
        print(line)
    for k, v in sorted(r.crashes.items()):
        print(f"torch dies: {k}: {v}")
    print(f"{r.compared} cases compared, {r.equal} equal, {r.differing} differ, "
          f"{len(r.diffs)} ops differ, torch dies on {len(r.crashes)}; "
          f"{time.time() - t0:.0f}s")
