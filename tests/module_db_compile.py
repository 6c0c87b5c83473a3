"""PyTorch's ModuleInfo modules through ``ember.compile`` (test_module_db_compile.py).

For each module of ``module_db`` (tests/module_db_harness.py builds both sides and
converts the arguments), float32 and float64, train and eval mode, and its first samples
whose forward takes tensors (nested in tuples or passed by keyword), three copies of
ember's module are made from torch's ``state_dict()``: one runs eagerly (the reference),
one through ``ember.compile(module)``, one through a compiled function that calls it.
Each call runs on the eager copy and a compiled one from the same arrays, with fresh
input tensors and the same seed (dropout-like draws are eager ember's), and must agree
to the bit: the outputs (nesting, dtype, shape, values), the gradients of ``sum(output *
w)`` (``w`` fixed random) with respect to the inputs and every parameter (to rounding:
the compiled backward differentiates the recorded graph), every parameter and buffer
after the call (BatchNorm's running statistics and ``num_batches_tracked`` move on each
call). Where eager ember raises, the compiled call must raise the same type. The calls:
the sample, the sample again (the replay), other values (the floats permuted; the sample
drawn under another seed), a transposed and a strided layout, under ``no_grad``, other
batch / length / spatial sizes the module allows (grown by one, twice, then cut to one
and to zero: the captures at two sizes with one graph make the sizes symbolic, so a
size-1 branch must be guarded), after ``train()``/``eval()`` switches, after a parameter
is scaled in place and after one is replaced, with a forward hook and a pre-hook added
after the first call and after they are removed. The first call is compared with torch
too (``torch.testing`` tolerances). For modules with parameters a compiled training step
(zero_grad, forward, loss, backward, SGD with momentum or Adam with eps 1e-3) runs three
times against the same eager step: the losses and the parameters after each step.

``python tests/module_db_compile.py [Module...]`` prints each case's outcome.
"""
import copy
import warnings

import numpy as np
import torch
from compile_opdb_harness import Call
from module_db_harness import (
    _flat,
    _is_lazy,
    _load,
    build_ember,
    build_torch,
    infos,
    samples,
)
from module_db_trace import _rebuild, _structure
from trace_sweep import _grown

import ember

# samples per module, dtype and mode
SAMPLES = 2
DTYPES = (torch.float32, torch.float64)
# other sizes tried per case (after the grown-twice pair and the size-1 cut)
MAX_SIZES = 2


def _leaves(s):
    fwd = s.forward_input
    leaves = []
    kwargs = {k: v for k, v in fwd.kwargs.items() if v is not None}
    return (_structure(tuple(fwd.args), leaves), _structure(kwargs, leaves)), leaves


def picked(info, dtype, training, n=SAMPLES):
    """The first ``n`` samples whose forward takes tensors: (sample, structure, leaves,
    other), ``other`` the same sample's arrays drawn under another seed (None where its
    shapes differ): other values within the sample's own ranges and counts."""
    out = []
    draws = samples(info, dtype, training)
    torch.manual_seed(1)
    again = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                    training=training)
    for i, s in enumerate(draws):
        structure, leaves = _leaves(s)
        if not leaves:
            continue
        other = None
        if i < len(again):
            _, leaves2 = _leaves(again[i])
            if [tuple(t.shape) for t in leaves2] == [tuple(t.shape) for t in leaves] and \
                    [t.dtype for t in leaves2] == [t.dtype for t in leaves]:
                other = [t.detach().numpy().copy() for t in leaves2]
        out.append((s, structure, leaves, other))
        if len(out) == n:
            break
    return out


def cases(selected=None, n=SAMPLES):
    """(case id, info, dtype, training, picked sample) over the table."""
    out = []
    for name, info in sorted(infos().items()):
        if selected and name not in selected:
            continue
        for dtype in DTYPES:
            for training in (True, False):
                for i, p in enumerate(picked(info, dtype, training, n)):
                    key = f"{name}/{str(dtype)[6:]}/{'train' if training else 'eval'}/{i}"
                    out.append((key, info, dtype, training, p))
    return out


# ----- comparisons ------------------------------------------------------------------------
def _err(ex):
    return f"{type(ex).__name__}: {str(ex).splitlines()[0][:120] if str(ex) else ''}"


def _shape_of(x):
    """The nesting of a result with its tensors as (dtype, shape)."""
    if isinstance(x, ember.Tensor):
        return ("T", str(x.dtype), tuple(x.shape), x.requires_grad)
    if isinstance(x, (tuple, list)):
        return (type(x).__name__,) + tuple(_shape_of(v) for v in x)
    return repr(x)


def _bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _close(a, b, atol=0.0):
    """Equal to rounding: a few ulps of the dtype, relative to the largest value (and
    ``atol``)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    finite = np.abs(a[np.isfinite(a)])
    scale = max(1.0, float(finite.max()) if finite.size else 1.0)
    eps = np.finfo(a.dtype).eps
    return bool(np.allclose(a, b, rtol=64 * eps, atol=64 * eps * scale + atol,
                            equal_nan=True))


def _state(mod):
    """Every parameter and buffer of ``mod`` as arrays, by name."""
    out = {n: p.detach().numpy().copy() for n, p in mod.named_parameters()}
    out.update({n: b.detach().numpy().copy() for n, b in mod.named_buffers()
                if b is not None})
    return out


def _weights(outs, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(o.shape)) for o in outs]


def _run(fn, mod, call, structure, grad=True, seed=0, differentiate=True):
    """One call of ``fn`` (the eager module or a compiled one) at ``call``: (result,
    [input grads], {param: grad}) or (exception, None, None). The gradients are of
    ``sum(output * w)`` over the differentiable outputs."""
    tensors = call.tensors()
    args, kwargs = _rebuild(structure[0], tensors), _rebuild(structure[1], tensors)
    for p in mod.parameters():
        p.grad = None
    ember.manual_seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if grad:
                out = fn(*args, **kwargs)
            else:
                with ember.no_grad():
                    out = fn(*args, **kwargs)
    except Exception as ex:  # the outcome compared
        return ex, None, None
    diff = [o for o in _flat(out) if isinstance(o, ember.Tensor) and o.requires_grad
            and o.dtype in (ember.float32, ember.float64)]
    if not diff or not differentiate:
        return out, [], {}
    loss = sum(((o * ember.from_numpy(w).to(o.dtype)).sum() for o, w in
                zip(diff, _weights(diff))), ember.zeros((), dtype=diff[0].dtype))
    try:
        loss.backward()
    except Exception as ex:
        return ex, None, None
    grads = [None if t.grad is None else t.grad.numpy().copy() for t in tensors
             if t.requires_grad]
    pgrads = {n: None if p.grad is None else p.grad.numpy().copy()
              for n, p in mod.named_parameters()}
    return out, grads, pgrads


def _compare(label, want, got, e_mod, c_mod):
    """What differs between the eager call's results and the compiled one's: '' or a
    line."""
    w_out, w_g, w_pg = want
    g_out, g_g, g_pg = got
    if isinstance(w_out, Exception) or isinstance(g_out, Exception):
        if not isinstance(w_out, Exception):
            return f"{label}: compiled raises {_err(g_out)}"
        if not isinstance(g_out, Exception):
            return f"{label}: eager raises {_err(w_out)}, compiled does not"
        if type(g_out) is not type(w_out):
            return f"{label}: compiled raises {_err(g_out)}, eager {_err(w_out)}"
        return ""
    if _shape_of(w_out) != _shape_of(g_out):
        return f"{label}: result {_shape_of(g_out)} != eager {_shape_of(w_out)}"
    for i, (a, b) in enumerate(zip(_flat(w_out), _flat(g_out))):
        if isinstance(a, ember.Tensor) and not _bits(a.detach().numpy(), b.detach().numpy()):
            return f"{label}: out{i} values differ from eager"
    for i, (a, b) in enumerate(zip(w_g, g_g)):
        if (a is None) != (b is None) or (a is not None and not _close(a, b)):
            return f"{label}: input{i}.grad differs from eager"
    for n, a in w_pg.items():
        b = g_pg.get(n)
        if (a is None) != (b is None) or (a is not None and not _close(a, b)):
            return f"{label}: {n}.grad differs from eager"
    ws, gs = _state(e_mod), _state(c_mod)
    if list(ws) != list(gs):
        return f"{label}: state names {list(gs)} != eager {list(ws)}"
    for n, a in ws.items():
        if not _bits(a, gs[n]):
            return f"{label}: {n} after the call differs from eager"
    return ""


def _torch_compare(t_out, e_out):
    """'' when the compiled first call's outputs are torch's to its tolerances."""
    tf = [o for o in _flat(t_out) if isinstance(o, torch.Tensor)]
    ef = [o for o in _flat(e_out) if isinstance(o, ember.Tensor)]
    if len(tf) != len(ef):
        return f"torch: {len(ef)} tensors != torch's {len(tf)}"
    for i, (a, b) in enumerate(zip(ef, tf)):
        try:
            torch.testing.assert_close(torch.from_numpy(a.detach().numpy().copy()),
                                       b.detach(), equal_nan=True, atol=1e-4, rtol=1e-3)
        except AssertionError as ex:
            return f"torch: out{i} {str(ex).splitlines()[0][:100]}"
    return ""


# ----- the calls --------------------------------------------------------------------------
def _permuted(arrays, seed):
    rng = np.random.default_rng(seed)
    out = []
    for a in arrays:
        if a.dtype.kind == "f" and a.size > 1:
            out.append(rng.permutation(a.reshape(-1)).reshape(a.shape))
        else:
            out.append(a)
    return out


def _cut(arrays, n0):
    """Axis 0 of every input whose axis 0 is ``n0`` cut to its first element."""
    return [a[:1].copy() if a.ndim and a.shape[0] == n0 else a for a in arrays]


def _sizes(arrays, accepts):
    """Other sizes the module allows: (label, arrays). Axis 0 of every input that has
    it at the same size grown by one, then by two (two captures with one graph: symbolic
    sizes), then cut to one; then single dimensions grown by one."""
    out = []
    lead = [a.shape[0] for a in arrays if a.ndim]
    if lead:
        n0 = lead[0]
        one = list(arrays)
        for j, a in enumerate(arrays):
            if a.ndim and a.shape[0] == n0:
                one = _grown(one, j, 0)
        two = list(one)
        for j, a in enumerate(one):
            if a.ndim and a.shape[0] == n0 + 1:
                two = _grown(two, j, 0)
        for label, xs in (("batch+1", one), ("batch+2", two)):
            if accepts(xs):
                out.append((label, xs))
        if n0 > 1 and out:
            # (eager may raise there: the compiled call must raise the same)
            out.append(("batch 1", _cut(arrays, n0)))
            out.append(("batch 0", [a[:0].copy() if a.ndim and a.shape[0] == n0 else a
                                    for a in arrays]))
    found = 0
    for i, a in enumerate(arrays):
        for d in range(1, a.ndim):
            if found == MAX_SIZES or a.shape[d] < 2:
                continue
            xs = _grown(arrays, i, d)
            if accepts(xs):
                out.append((f"input{i} dim{d}+1", xs))
                out.append((f"input{i} dim{d} cut to 1",
                            [np.take(x, [0], axis=d) if j == i else x
                             for j, x in enumerate(arrays)]))
                found += 1
    return out


def _first_param(mod):
    """(owning submodule, name, parameter) of the first parameter, or None."""
    for m in mod.modules():
        for n, p in m._parameters.items():
            if p is not None:
                return m, n, p
    return None


def _hooks(mod):
    def pre(m, args):
        return tuple(a * 2 if isinstance(a, ember.Tensor) and a.dtype.is_floating_point
                     else a for a in args)

    def post(m, args, out):
        if isinstance(out, ember.Tensor) and out.dtype.is_floating_point:
            return out + 1
        return None
    return [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]


def run_case(info, dtype, training, picked_sample, step_opt="sgd"):
    """{stage: outcome}: "equal", "skip: why" or what differs (the first difference)."""
    sample, structure, leaves, other = picked_sample
    arrays = [a.detach().numpy().copy() for a in leaves]
    grads = [bool(a.requires_grad and a.dtype.is_floating_point) for a in leaves]
    t_mod = build_torch(info, sample, dtype, training)
    try:
        base = build_ember(info, sample, dtype, training, {})
    except Exception as ex:
        return {"module": f"skip: ember's construction raises {_err(ex)}"}
    if _is_lazy(t_mod):
        first = Call("lazy", arrays, [False] * len(arrays))
        with torch.no_grad():
            ts = [torch.from_numpy(a.copy()) for a in arrays]
            t_mod(*_rebuild(structure[0], ts), **_rebuild(structure[1], ts))
        with ember.no_grad():
            ts = first.tensors()
            base(*_rebuild(structure[0], ts), **_rebuild(structure[1], ts))
    _load(base, t_mod)
    probe = copy.deepcopy(base)

    def accepts(xs):
        return not isinstance(_run(probe, probe, Call("", xs, [False] * len(xs)),
                                   structure, grad=False)[0], Exception)

    if not accepts(arrays):
        return {"module": "skip: eager ember raises at the sample"}
    out = {"module": _module_calls(base, structure, arrays, grads, accepts, t_mod, other)}
    out["function"] = _function_calls(base, structure, arrays, grads, accepts)
    if any(p.requires_grad for p in base.parameters()):
        out["step"] = _step_calls(base, structure, arrays, step_opt, dtype)
    return out


def _module_calls(base, structure, arrays, grads, accepts, t_mod, other=None):
    e_mod, c_mod = copy.deepcopy(base), copy.deepcopy(base)
    compiled = ember.compile(c_mod)
    sample = Call("sample", arrays, grads)

    def both(call, grad=True, seed=0):
        want = _run(e_mod, e_mod, call, structure, grad, seed)
        got = _run(compiled, c_mod, call, structure, grad, seed)
        return want, got, _compare(call.label, want, got, e_mod, c_mod)

    _, got, bad = both(sample)
    if bad:
        return bad
    if not isinstance(got[0], Exception):
        ts = [torch.from_numpy(a.copy()) for a in arrays]
        torch.manual_seed(0)
        try:
            t_out = t_mod(*_rebuild(structure[0], ts), **_rebuild(structure[1], ts))
        except Exception as ex:
            return f"torch raises {_err(ex)} where ember does not"
        bad = _torch_compare(t_out, got[0])
        if bad:
            return bad
    calls = [Call("again", arrays, grads), Call("other values", _permuted(arrays, 5), grads)]
    if other is not None and accepts(other):
        calls.append(Call("another draw", other, grads))
    if any(a.ndim >= 2 for a in arrays):
        calls.append(Call("transposed", arrays, grads, ["t"] * len(arrays)))
    if any(a.ndim >= 1 and a.size for a in arrays):
        calls.append(Call("strided", arrays, grads, ["s"] * len(arrays)))
    calls.append(Call("seed 1", arrays, grads))
    for call in calls:
        bad = both(call, seed=1 if call.label == "seed 1" else 0)[2]
        if bad:
            return bad
    bad = both(Call("no_grad", arrays, grads), grad=False)[2]
    if bad:
        return bad
    for label, xs in _sizes(arrays, accepts):
        bad = both(Call(label, xs, grads))[2] or both(Call(label + " again", xs, grads))[2]
        if bad:
            return bad
    for mode in (not e_mod.training, e_mod.training):
        e_mod.train(mode)
        c_mod.train(mode)
        bad = both(Call(f"after train({mode})", arrays, grads))[2]
        if bad:
            return bad
    owner = _first_param(e_mod)
    if owner is not None:
        c_owner = _first_param(c_mod)
        with ember.no_grad():
            owner[2].mul_(2)
            c_owner[2].mul_(2)
        bad = both(Call("after p.mul_(2)", arrays, grads))[2]
        if bad:
            return bad
        for (m, n, p) in (owner, c_owner):
            setattr(m, n, ember.nn.Parameter(p.detach() * 0.5 + 0.25,
                                             requires_grad=p.requires_grad))
        bad = both(Call("after a parameter is replaced", arrays, grads))[2]
        if bad:
            return bad
    handles = _hooks(e_mod) + _hooks(c_mod)
    bad = both(Call("with hooks added", arrays, grads))[2]
    for h in handles:
        h.remove()
    if bad:
        return bad
    return both(Call("hooks removed", arrays, grads))[2] or "equal"


def _function_calls(base, structure, arrays, grads, accepts):
    e_mod, c_mod = copy.deepcopy(base), copy.deepcopy(base)

    def call_it(*xs, **kw):
        return c_mod(*xs, **kw)
    compiled = ember.compile(call_it)
    calls = [Call("fn sample", arrays, grads), Call("fn again", arrays, grads)]
    calls += [Call("fn " + label, xs, grads) for label, xs in _sizes(arrays, accepts)[:3]]
    for call in calls:
        want = _run(e_mod, e_mod, call, structure)
        got = _run(compiled, c_mod, call, structure)
        bad = _compare(call.label, want, got, e_mod, c_mod)
        if bad:
            return bad
    return "equal"


def _step_calls(base, structure, arrays, step_opt, dtype):
    e_mod, c_mod = copy.deepcopy(base), copy.deepcopy(base)

    def make_step(mod):
        params = [p for p in mod.parameters() if p.requires_grad]
        opt = ember.optim.SGD(params, lr=0.01, momentum=0.9) if step_opt == "sgd" else \
            ember.optim.Adam(params, lr=0.01, eps=1e-3)
        # (Adam divides by the gradient's own size: with the default eps a gradient that
        # is zero in exact arithmetic, attention's key bias, is rounding noise either way
        # that it turns into steps of up to 1e-4 in float32)

        def step(*xs, **kw):
            opt.zero_grad()
            out = mod(*xs, **kw)
            diff = [o for o in _flat(out) if isinstance(o, ember.Tensor) and o.requires_grad]
            loss = sum(((o * w).sum() for o, w in zip(diff, weights)),
                       ember.zeros((), dtype=ember.float64 if dtype == torch.float64
                                   else ember.float32))
            loss.backward()
            opt.step()
            return loss
        return step

    weights = None
    e_step = make_step(e_mod)
    c_step = ember.compile(make_step(c_mod))
    for i in range(3):
        call = Call(f"step {i}", arrays if i != 1 else _permuted(arrays, 7),
                    [False] * len(arrays))
        if weights is None:
            probe = copy.deepcopy(base)
            r = _run(probe, probe, call, structure, grad=False)[0]
            if isinstance(r, Exception):
                return f"skip: {_err(r)}"
            diff = [o for o in _flat(r) if isinstance(o, ember.Tensor)
                    and o.dtype.is_floating_point]
            if not diff:
                return "skip: no floating output"
            weights = [ember.from_numpy(w).to(o.dtype) for o, w in zip(diff, _weights(diff))]
        want = _run(e_step, e_mod, call, structure, differentiate=False)
        got = _run(c_step, c_mod, call, structure, differentiate=False)
        if isinstance(want[0], Exception) or isinstance(got[0], Exception):
            bad = _compare(call.label, want, got, e_mod, c_mod)
            return bad or f"skip: {_err(want[0])}"
        if not _close(want[0].detach().numpy(), got[0].detach().numpy()):
            return f"{call.label}: loss differs from eager"
        ws, gs = _state(e_mod), _state(c_mod)
        for n, a in ws.items():
            if not _close(a, gs[n]):
                return f"{call.label}: {n} after the step differs from eager"
    return "equal"


def run_all(selected=None, n=SAMPLES, every=1, always=()):
    """{case: {stage: outcome}} over the table: every ``every``-th case and the cases
    named in ``always``."""
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, (key, info, dtype, training, p) in enumerate(cases(selected, n)):
            if i % every and key not in always:
                continue
            try:
                results[key] = run_case(info, dtype, training, p,
                                        "sgd" if i % 2 == 0 else "adam")
            except Exception as ex:
                results[key] = {"module": f"harness raises {_err(ex)}"}
    return results


if __name__ == "__main__":
    import sys
    import time
    t0 = time.time()
    res = run_all(sys.argv[1:] or None)
    for k, v in res.items():
        print(k, v)
    print(f"{len(res)} cases in {time.time() - t0:.0f} s")
