"""Run the op oracle's tables with ember on the ``cuda`` device.

Every ``oracle.Case`` found in the test modules' tables is run with its inputs moved to
ember's ``cuda`` device and compared with torch (on ``cuda`` on a GPU machine, on the
CPU in a dry run against the CuPy test double). Each case gets one outcome:

- ``pass``: forward (and first gradients, where the case has them) match torch, every
  output lives on ``cuda``;
- ``mismatch``: a value, dtype, shape or device differs;
- ``error``: ember raised where torch did not (``implicit`` when the error is NumPy
  refusing a device array: a place that reaches NumPy directly);
- ``both_raise``: both libraries refused (e.g. the case builds a CPU tensor inside);
- ``torch_error``: only torch refused (its GPU kernels lack the op or dtype);
- ``device_unverified`` (dry runs only): an output ember leaves on the CPU, where the
  meta probe could not say whether torch does too (PackedSequence's sizes do);
- ``device_mix`` (dry runs only): ember raised torch's mixed-device error for a CPU
  tensor that the case builds, which torch on the CPU cannot confirm.

With the CuPy double, each case also reports how many device-to-host array copies
ember made while computing it (``host_copies``): a nonzero count is an op that falls
back to the host.
"""
import importlib
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)

# the test modules whose tables hold oracle cases, by op family
FAMILIES = {
    "elementwise": ["test_ops_elementwise"],
    "reduction": ["test_ops_reduction"],
    "shape": ["test_ops_shape"],
    "indexing": ["test_ops_indexing"],
    "linalg": ["test_ops_linalg"],
    "nn_functional": ["test_nn_functional", "test_nn_losses", "test_nn_pool_norm",
                      "test_nn_conv", "test_nn_attention"],
    "nn_layers": ["test_nn_layers", "test_nn_rnn"],
    "tensor_methods": ["test_tensor_methods", "test_torch_kernels"],
    "fused_and_fast_paths": ["test_nn_fused", "test_nn_perf_paths", "test_interpolate_uint8",
                             "test_storage_views", "test_audit"],
}


IMPORT_ERRORS = {}  # test modules that could not be imported (their cases did not run)


def collect(families=None):
    """``[(family, table name, case)]`` for every oracle case in the families' modules."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    oracle = importlib.import_module("oracle")
    out, seen = [], set()
    for fam, mods in FAMILIES.items():
        if families and fam not in families:
            continue
        for mod_name in mods:
            try:
                mod = importlib.import_module(mod_name)
            except Exception as e:  # noqa: BLE001  (another torch may lack a name it uses)
                IMPORT_ERRORS[mod_name] = f"{type(e).__name__}: {e}"
                continue
            for name, val in vars(mod).items():
                if not (name.isupper() and isinstance(val, list)):
                    continue
                for c in val:
                    if isinstance(c, oracle.Case) and id(c) not in seen:
                        seen.add(id(c))
                        out.append((fam, f"{mod_name}.{name}", c))
    return out


def _move(m, arrays, rg, dev):
    ts = []
    for a, r in zip(arrays, rg):
        if isinstance(a, np.ndarray):
            t = m.from_numpy(a.copy() if a.flags.c_contiguous else a).to(dev)
            if r:
                t.requires_grad_(True)
            ts.append(t)
        else:
            ts.append(a)
    return ts


def _flat(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(_flat(o))
        return res
    return [out]


def _packed_sizes(out):
    """Per flattened output, whether it is a PackedSequence's ``batch_sizes`` (which
    torch keeps on the CPU whatever the device of the data)."""
    if isinstance(out, (tuple, list)):
        if hasattr(out, "batch_sizes") and hasattr(out, "_fields"):
            return [f == "batch_sizes" for f in out._fields]
        res = []
        for o in out:
            res.extend(_packed_sizes(o))
        return res
    return [False]


def _host(t):
    """A NumPy copy of a tensor of either library (None for non-tensors)."""
    if hasattr(t, "detach"):
        t = t.detach()
        if getattr(t, "dtype", None) is not None and "bfloat16" in str(t.dtype):
            t = t.float()
        return t.cpu().resolve_conj().numpy() if hasattr(t, "resolve_conj") else t.cpu().numpy()
    return t


def _compare(e_out, t_out, case, what, dev_type, stays_cpu=None):
    """None when ember's outputs match torch's, else what differs. ``stays_cpu``: per
    output, whether torch keeps it on the CPU (from a meta probe when torch runs on the
    CPU; otherwise read from torch's own outputs)."""
    import oracle
    e_fl, t_fl = _flat(e_out), _flat(t_out)
    if len(e_fl) != len(t_fl):
        return f"{what}: {len(e_fl)} outputs != torch {len(t_fl)}"
    for i, (e, t) in enumerate(zip(e_fl, t_fl)):
        if hasattr(t, "shape") and hasattr(t, "device"):
            if not hasattr(e, "device"):
                return f"{what}[{i}] is {type(e).__name__}, not a Tensor"
            want = dev_type
            if stays_cpu is not None and i < len(stays_cpu) and stays_cpu[i]:
                want = "cpu"
            elif stays_cpu is None and t.device.type == "cpu":
                want = "cpu"  # torch on a GPU keeps this output on the CPU
            if e.device.type != want:
                if stays_cpu == [] and e.device.type == "cpu":
                    # the meta probe failed: whether torch keeps it on the CPU is unknown
                    return f"UNVERIFIED {what}[{i}] is on cpu"
                return f"{what}[{i}] is on {e.device}, not {want}"
            if tuple(e.shape) != tuple(t.shape):
                return f"{what}[{i}] shape {tuple(e.shape)} != torch {tuple(t.shape)}"
            if str(e.dtype).split(".")[-1] != str(t.dtype).split(".")[-1]:
                return f"{what}[{i}] dtype {e.dtype} != torch {t.dtype}"
            ea, ta = _host(e), _host(t)
            if ea.dtype.kind in "biu":
                if not np.array_equal(ea, ta):
                    return f"{what}[{i}] values differ"
            else:
                rtol, atol = oracle._tol(case, ea.dtype)
                # a GPU's reductions and transcendental functions round differently
                rtol, atol = max(rtol, 1e-5), max(atol, 1e-6)
                if not np.allclose(ea, ta, rtol=rtol, atol=atol, equal_nan=True):
                    err = np.nanmax(np.abs(ea.astype(np.complex128) - ta))
                    return f"{what}[{i}] values differ (max abs err {err:.3g})"
        elif hasattr(e, "device") and hasattr(e, "item"):
            if e.numel() == 1 and e.item() != t and not (e.item() != e.item() and t != t):
                return f"{what}[{i}] {e.item()} != {t}"
        elif e != t and not (e != e and t != t):
            return f"{what}[{i}] {e!r} != {t!r}"
    return None


def _where(exc):
    """The innermost ember frames of an exception's traceback, as ``file:line fn``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.sep + "ember" + os.sep in f.filename and "fake_cupy" not in f.filename]
    return " < ".join(f"{f.filename.rsplit(os.sep + 'ember' + os.sep, 1)[-1]}:{f.lineno} "
                      f"{f.name}" for f in frames[::-1][:3])


def _outcome(msg):
    return "device_unverified" if msg.startswith("UNVERIFIED") else "mismatch"


# cases whose first gradients are compared as made with ``create_graph=True`` (as
# oracle.check makes them): torch's gradient of ``det`` at a singular matrix is its SVD
# formula (the cofactors) there, while without a graph torch solves with its LU and gets
# the cofactors or zeros depending on whether its LAPACK kernel rounds the determinant
# to exactly 0 (zeros with MKL on AMD Zen 3; the cofactors on the SkylakeX machine where
# this case passed before); ember gives the cofactors, the same with or without a graph
_FIRST_GRADS_WITH_GRAPH = frozenset({"det_singular"})


def run_case(case, ember, torch, e_dev="cuda", t_dev="cuda", grad=True):
    """Run one case; a dict with its outcome, message and ember's host copies."""
    import oracle
    cupy = sys.modules.get("cupy")
    counts = getattr(cupy, "transfers", None)
    arrays = oracle.make_inputs(case)
    rg = case.requires_grad
    if rg is None:
        rg = [isinstance(a, np.ndarray) and a.dtype.kind == "f" and case.grad for a in arrays]
    res = {"name": case.name, "outcome": "pass", "message": "", "host_copies": 0,
           "scalar_reads": 0}
    t_err = None
    stays_cpu = None
    if t_dev == "cpu" and e_dev != "cpu":
        stays_cpu = []
        # torch on the CPU cannot say whether the case mixes devices (it builds CPU tensors
        # inside); torch on ``meta`` can: it refuses mixed devices as it does on a GPU
        try:
            probe = case.fn(torch, *_move(torch, arrays, rg, "meta"))
            # outputs torch keeps on the CPU whatever the inputs (PackedSequence's sizes)
            stays_cpu = [getattr(getattr(o, "device", None), "type", None) == "cpu"
                         for o in _flat(probe)]
        except Exception as e:  # noqa: BLE001
            if "same device" in str(e):
                t_err = e
    if t_err is None:
        try:
            t_in = _move(torch, arrays, rg, t_dev)
            t_out = case.fn(torch, *t_in)
            if stays_cpu is not None and any(_packed_sizes(t_out)):
                stays_cpu = _packed_sizes(t_out)
        except Exception as e:  # noqa: BLE001  (the outcome records any refusal)
            t_err = e
    before = dict(counts) if counts is not None else None
    try:
        e_in = _move(ember, arrays, rg, e_dev)
        if counts is not None:
            before = dict(counts)
        e_out = case.fn(ember, *e_in)
        e_err = None
    except Exception as e:  # noqa: BLE001
        e_err = e
        e_tb = _where(e)
    if t_err is not None:
        res["outcome"] = "both_raise" if e_err is not None else "torch_error"
        res["message"] = f"torch: {type(t_err).__name__}: {str(t_err)[:160]}"
        if e_err is not None:
            res["same_error_type"] = type(e_err) is type(t_err)
            res["ember_message"] = f"{type(e_err).__name__}: {str(e_err)[:160]}"
            res["where"] = e_tb
        return res
    if e_err is not None:
        msg = f"{type(e_err).__name__}: {str(e_err)[:200]}"
        implicit = "Implicit conversion" in msg or "Unsupported type" in msg
        res.update(outcome="error", implicit=implicit, message=msg, where=e_tb)
        if stays_cpu is not None and "Expected all tensors to be on the same device" in msg:
            # torch's rule, applied to a CPU tensor the case builds; torch on the CPU
            # cannot confirm it (on a GPU, torch raises it too)
            res["outcome"] = "device_mix"
        return res
    try:
        if grad and case.grad:
            e_outs = [o for o in _flat(e_out) if hasattr(o, "grad_fn") and o.requires_grad]
            t_outs = [o for o in _flat(t_out) if hasattr(o, "grad_fn") and o.requires_grad]
            if len(e_outs) == len(t_outs) and t_outs:
                rng = np.random.default_rng(1)
                gos = [rng.standard_normal(tuple(o.shape)).astype(_host(o).dtype)
                       for o in t_outs]
                e_leaves = [x for x, r in zip(e_in, rg) if r]
                t_leaves = [x for x, r in zip(t_in, rg) if r]
                with_graph = case.name in _FIRST_GRADS_WITH_GRAPH
                e_g = ember.autograd.grad(
                    e_outs, e_leaves, [ember.tensor(g).to(e_dev) for g in gos],
                    create_graph=with_graph, allow_unused=True)
                t_g = torch.autograd.grad(
                    t_outs, t_leaves, [torch.tensor(g).to(t_dev) for g in gos],
                    create_graph=with_graph, allow_unused=True)
                pairs = [(a, b) for a, b in zip(e_g, t_g) if a is not None and b is not None]
                if counts is not None:
                    res["host_copies"] = counts["to_host"] - before["to_host"]
                    res["scalar_reads"] = counts["scalar_reads"] - before["scalar_reads"]
                msg = _compare(e_out, t_out, case, "forward", e_dev.split(":")[0], stays_cpu)
                msg = msg or _compare([a for a, _ in pairs], [b for _, b in pairs], case,
                                      "grad", e_dev.split(":")[0], stays_cpu and [])
                if msg:
                    res.update(outcome=_outcome(msg), message=msg)
                return res
            elif len(e_outs) != len(t_outs):
                res.update(outcome="mismatch", message="differentiable outputs differ")
                return res
        if counts is not None:
            res["host_copies"] = counts["to_host"] - before["to_host"]
            res["scalar_reads"] = counts["scalar_reads"] - before["scalar_reads"]
        msg = _compare(e_out, t_out, case, "forward", e_dev.split(":")[0], stays_cpu)
        if msg:
            res.update(outcome=_outcome(msg), message=msg)
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {str(e)[:200]}"
        implicit = "Implicit conversion" in msg or "Unsupported type" in msg
        res.update(outcome="error", implicit=implicit, message="backward: " + msg,
                   where=_where(e))
    return res


def sweep(families=None, e_dev="cuda", t_dev="cuda", grad=True, budget_s=None, log=None):
    """Run every collected case; ``{family: [result, ...]}`` (stops at ``budget_s``)."""
    import torch

    import ember
    start = time.monotonic()
    results = {}
    cases = collect(families)
    fams = list(dict.fromkeys(f for f, _, _ in cases))
    fam_end = None
    for fam, table, case in cases:
        if budget_s is not None and (fam_end is None or fam_end[0] != fam):
            # each family gets an equal share of the time left (a GPU compiles a kernel
            # the first time it meets one, so the first cases are slow)
            left = fams[fams.index(fam):]
            share = (budget_s - (time.monotonic() - start)) / len(left)
            fam_end = (fam, time.monotonic() + share)
        if budget_s is not None and time.monotonic() > fam_end[1]:
            results.setdefault(fam, []).append({"name": case.name, "outcome": "skipped",
                                                "message": "out of time"})
            continue
        r = run_case(case, ember, torch, e_dev, t_dev, grad)
        r["table"] = table
        results.setdefault(fam, []).append(r)
        if log is not None and r["outcome"] in ("error", "mismatch"):
            log.write(f"[{fam}] {case.name}: {r['outcome']}: {r['message']}\n")
    return results


def summary(results):
    """Counts per family and outcome, plus the cases that copied to the host."""
    table = {}
    host = []
    for fam, rs in results.items():
        c = table.setdefault(fam, {})
        for r in rs:
            key = r["outcome"]
            c[key] = c.get(key, 0) + 1
            if r.get("host_copies"):
                host.append(f"{fam}: {r['name']} ({r['host_copies']})")
    return table, host


if __name__ == "__main__":
    import argparse
    import json
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", nargs="*")
    p.add_argument("--torch-device", default="cuda")
    p.add_argument("--no-grad", action="store_true")
    p.add_argument("--out")
    p.add_argument("--budget", type=float)
    a = p.parse_args()
    res = sweep(a.families, "cuda", a.torch_device, not a.no_grad, a.budget, log=sys.stdout)
    counts, host = summary(res)
    print(json.dumps(counts, indent=1))
    print("host copies:", *host, sep="\n  ")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"counts": counts, "host_fallbacks": host, "results": res}, f, indent=1)
