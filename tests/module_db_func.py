"""PyTorch's ModuleInfo modules through the functional API: ``ember.func`` against the
real ``torch.func`` on the same module, parameters and inputs.

A case is one sample of one ``ModuleInfo`` for a dtype and a mode (both sides built by
tests/module_db_harness.py: the same constructor arguments, torch's ``state_dict``).
The sample's tensors (positional and keyword, nested in tuples) are the *leaves*; the
module is called through a function of the leaves, so that every transform sees them
as plain arguments. A *batch* of ``B`` samples stacks the leaves with the floating ones
scaled by ``1 - 0.05 b`` (signs, probabilities and variances stay in their domain; the
samples differ). The stages, each compared with torch.func on values (torch.testing's
tolerances for the dtype), shapes, dtypes and nesting, and on which side raises:

* ``call``: ``functional_call`` with seeded random parameters and buffers (buffers
  positive, integer buffers kept), the buffers given afterwards (a train-mode update
  lands in them) and the module's own tensors after the call (restored);
* ``strict``: ``strict=True`` with the parameters alone (a module with buffers raises),
  and with every tensor given;
* ``tied``: the module held under two names of one container; the parameters given under
  the second name only, with ``tie_weights`` True (both names follow) and False;
* ``psg``: per-sample gradients, ``vmap(grad(loss), in_dims=(None, None, 0, ...))`` of
  ``sum(o.sum() + 0.5 (o * o).sum())`` over the floating outputs ``o``, with respect to
  the parameters and the first floating leaf;
* ``vmap0`` / ``vmap_last``: ``vmap`` of the forward over a leading batch dim, and over a
  new last dim of every leaf (``in_dims=-1``);
* ``ensemble``: ``stack_module_state`` of two copies (the second's parameters scaled by
  0.9) and ``vmap`` over the stacked state, the input shared;
* ``jacrev``: the Jacobian of the floating outputs with respect to the first floating
  leaf, for inputs of at most :data:`JAC_MAX` elements.

Both sides are seeded (ember's generator draws PyTorch's numbers) before every stage, so
modules that draw (RReLU in train mode) compare too, and ``vmap``'s default
``randomness='error'`` must raise on both sides. Where torch refuses a stage (a running
statistic updated in place under vmap, a random op) ember must raise too: ember
computing something there is the silent difference this sweep hunts. Whether ember's
vmap fell back to its per-sample loop (exact, slower) is recorded, not failed.
"""
import warnings

import numpy as np
import torch
from module_db_harness import (
    _err,
    _is_lazy,
    _load,
    _same_exc,
    build_ember,
    build_torch,
    to_ember,
)

import ember
import ember.func as efunc
from ember.func import _vmap

B = 3  # samples per batch
JAC_MAX = 64  # the largest input (elements) whose Jacobian is compared
STAGES = ("call", "strict", "tied", "psg", "vmap0", "vmap_last", "ensemble", "jacrev")
FALLBACK = "falling back to a per-sample loop"


# ----- the sample as leaves -------------------------------------------------------------
class _Leaf:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def _skeleton(x, leaves):
    """``x`` with each tensor replaced by its index in ``leaves`` (appended there)."""
    if isinstance(x, torch.Tensor):
        leaves.append(x.detach())
        return _Leaf(len(leaves) - 1)
    if isinstance(x, (tuple, list)):
        return type(x)(_skeleton(v, leaves) for v in x)
    if isinstance(x, dict):
        return {k: _skeleton(v, leaves) for k, v in x.items()}
    return x


def _fill(x, tensors, conv):
    if isinstance(x, _Leaf):
        return tensors[x.i]
    if isinstance(x, (tuple, list)):
        return type(x)(_fill(v, tensors, conv) for v in x)
    if isinstance(x, dict):
        return {k: _fill(v, tensors, conv) for k, v in x.items()}
    return conv(x)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [o for v in x for o in _flat(v)]
    if isinstance(x, dict):
        return [o for v in x.values() for o in _flat(v)]
    return [x]


def _select(x, d, b):
    if d is None:
        return x
    if isinstance(x, dict):
        return {k: _select(v, d, b) for k, v in x.items()}
    return x.select(d, b)


def _stack(outs, d):
    first = outs[0]
    if isinstance(first, dict):
        return {k: _stack([o[k] for o in outs], d) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(_stack([o[i] for o in outs], d) for i in range(len(first)))
    return torch.stack(outs, d)


class _TorchLoop:
    """torch.func with ``vmap`` as a plain loop over the samples and ``jacrev`` as
    ``torch.autograd.functional.jacobian``: the meaning of a stage that torch.func
    refuses, where ember computes one."""

    grad = staticmethod(torch.func.grad)
    functional_call = staticmethod(torch.func.functional_call)
    stack_module_state = staticmethod(torch.func.stack_module_state)

    @staticmethod
    def vmap(f, in_dims=0, out_dims=0):
        def run(*args):
            dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
            n = next(_flat_all(a)[0].shape[d] for a, d in zip(args, dims) if d is not None)
            return _stack([f(*(_select(a, d, b) for a, d in zip(args, dims)))
                           for b in range(n)], out_dims)
        return run

    @staticmethod
    def jacrev(f):
        return lambda x: torch.autograd.functional.jacobian(f, x)


class _Side:
    """One library's module, its calling function of the leaves, and its transforms."""

    def __init__(self, lib, mod, skeleton, conv, fx=None):
        self.lib, self.mod, self.skeleton, self.conv = lib, mod, skeleton, conv
        self.fx = fx or (torch.func if lib is torch else efunc)

    def tensor(self, a):
        if self.lib is torch:
            return torch.from_numpy(np.array(a, copy=True))
        return ember.from_numpy(np.array(a, copy=True))

    def call(self, mod, tensors):
        args, kwargs = _fill(self.skeleton, tensors, self.conv)
        return mod(*args, **kwargs)

    def functional(self, params, buffers, tensors, mod=None):
        args, kwargs = _fill(self.skeleton, tensors, self.conv)
        return self.fx.functional_call(mod or self.mod, (params, buffers), tuple(args), kwargs)


def _floating(t):
    return t.dtype in (torch.float32, torch.float64)


def _loss(lib, out):
    total = None
    for o in _flat(out):
        if isinstance(o, lib.Tensor) and o.is_floating_point():
            term = o.sum() + 0.5 * (o * o).sum()
            total = term if total is None else total + term
    if total is None:
        raise TypeError("no floating output to differentiate")
    return total


def _batched(a, dim):
    """``B`` scaled copies of array ``a`` stacked at ``dim`` (integers copied)."""
    if np.issubdtype(a.dtype, np.floating):
        copies = [a * a.dtype.type(1 - 0.05 * b) for b in range(B)]
    else:
        copies = [a] * B
    return np.stack(copies, axis=dim)


# ----- comparing outcomes ----------------------------------------------------------------
def _compare(e, t, what, out):
    """Append to ``out`` what differs between ember's result ``e`` and torch's ``t``."""
    if isinstance(t, torch.Tensor):
        if not isinstance(e, ember.Tensor):
            out.append(f"{what}: ember gives {type(e).__name__}, torch a Tensor")
        elif tuple(e.shape) != tuple(t.shape):
            out.append(f"{what}: shape {tuple(e.shape)} != {tuple(t.shape)}")
        elif str(e.dtype)[6:] != str(t.dtype)[6:]:
            out.append(f"{what}: dtype {e.dtype} != {t.dtype}")
        else:
            try:
                torch.testing.assert_close(
                    torch.from_numpy(np.array(e.detach().numpy(), copy=True)), t.detach(),
                    equal_nan=True)
            except AssertionError as ex:
                detail = "; ".join(s.strip() for s in str(ex).splitlines() if "difference" in s)
                out.append(f"{what}: values ({detail[:140]})")
    elif isinstance(t, dict):
        if not isinstance(e, dict) or list(e) != list(t):
            out.append(f"{what}: keys {list(e) if isinstance(e, dict) else e!r} != {list(t)}")
            return
        for k in t:
            _compare(e[k], t[k], f"{what}[{k}]", out)
    elif isinstance(t, (tuple, list)):
        if not isinstance(e, (tuple, list)) or len(e) != len(t):
            out.append(f"{what}: ember gives {type(e).__name__}, torch a {type(t).__name__} "
                       f"of {len(t)}")
            return
        for i, (a, b) in enumerate(zip(e, t)):
            _compare(a, b, f"{what}[{i}]", out)
    elif t is None:
        if e is not None:
            out.append(f"{what}: ember gives {type(e).__name__}, torch None")
    elif isinstance(e, ember.Tensor) or e != t:
        out.append(f"{what}: {e!r} != {t!r}")


def _both(stage, t_fn, e_fn, loop_fn):
    """Run one stage on both sides (seeded alike). Returns ``(messages, fallback
    warnings, (ember's result, torch's) or None where a side raised)``."""
    torch.manual_seed(0)
    try:
        t_res = t_fn()
    except Exception as ex:  # an outcome compared
        t_res, t_exc = None, ex
    else:
        t_exc = None
    ember.manual_seed(0)
    saved, _vmap._warned = _vmap._warned, set()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                e_res = e_fn()
            except Exception as ex:
                e_res, e_exc = None, ex
            else:
                e_exc = None
    finally:
        _vmap._warned = saved
    fell = [str(w.message) for w in caught if FALLBACK in str(w.message)]
    if t_exc is not None or e_exc is not None:
        if t_exc is None:
            return [f"{stage}: ember raises {_err(e_exc)}"], fell, None
        if e_exc is None:
            return [f"{stage}: torch raises {_err(t_exc)}, ember computes "
                    f"{_loop_agrees(stage, loop_fn, e_res)}"], fell, None
        if not _same_exc(e_exc, t_exc):
            return [f"{stage}: ember raises {_err(e_exc)}, torch {_err(t_exc)}"], fell, None
        return [], fell, None
    out = []
    _compare(e_res, t_res, stage, out)
    return out, fell, (e_res, t_res)


def _loop_agrees(stage, loop_fn, e_res):
    """What ember's answer is where torch.func refuses: torch's own per-sample loop's
    (the stage's meaning), or something else."""
    torch.manual_seed(0)
    try:
        ref = loop_fn()
    except Exception as ex:
        return f"(torch's loop raises {_err(ex)})"
    out = []
    _compare(e_res, ref, stage, out)
    return "torch's per-sample answer" if not out else f"something else: {out[0]}"


# ----- one case --------------------------------------------------------------------------
class _Twice:
    """A container of the module (``a``) and a copy of it (``b``) whose parameters are
    ``a``'s own objects: each parameter tied under two names, as a language model ties
    its decoder to its embedding."""

    @staticmethod
    def build(lib, mod):
        import copy

        class Twice(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = mod
                self.b = copy.deepcopy(mod)
                for n, p in mod.named_parameters():
                    *path, last = n.split(".")
                    owner = self.b
                    for q in path:
                        owner = getattr(owner, q)
                    setattr(owner, last, p)

            def forward(self, *args, **kwargs):
                return self.a(*args, **kwargs)
        return Twice()


def _random_state(mod, seed):
    """Seeded NumPy arrays for every floating parameter and buffer (buffers positive)."""
    rng = np.random.default_rng(seed)
    params, buffers = {}, {}
    for n, p in mod.named_parameters():
        params[n] = (0.5 * rng.standard_normal(tuple(p.shape))).astype(p.detach().numpy().dtype)
    for n, b in mod.named_buffers():
        a = b.detach().numpy()
        if np.issubdtype(a.dtype, np.floating):
            buffers[n] = (0.5 + np.abs(rng.standard_normal(a.shape))).astype(a.dtype)
        else:
            buffers[n] = a.copy()
    return params, buffers


def _as(side, arrays):
    return {k: side.tensor(a) for k, a in arrays.items()}


def _state(mod):
    return ({n: p.detach() for n, p in mod.named_parameters()},
            {n: b.detach() for n, b in mod.named_buffers()})


def build_sides(info, sample, dtype, training):
    """``(torch side, ember side, leaves as arrays)``, or a string saying why the case does
    not run (the construction or the plain forward fails on a side: the eager sweep's
    business)."""
    try:
        t_mod = build_torch(info, sample, dtype, training)
        memo = {}
        e_mod = build_ember(info, sample, dtype, training, memo)
    except Exception as ex:
        return f"construct: {_err(ex)}"
    leaves = []
    skeleton = _skeleton((sample.forward_input.args, sample.forward_input.kwargs), leaves)
    arrays = [x.numpy().copy() for x in leaves]
    t_side = _Side(torch, t_mod, skeleton, lambda x: x)
    e_side = _Side(ember, e_mod, skeleton, lambda x: to_ember(x, memo))
    try:
        if _is_lazy(t_mod):
            with torch.no_grad():
                t_side.call(t_mod, [t_side.tensor(a) for a in arrays])
            with ember.no_grad():
                e_side.call(e_mod, [e_side.tensor(a) for a in arrays])
        _load(e_mod, t_mod)
    except Exception as ex:
        return f"forward: {_err(ex)}"
    return t_side, e_side, arrays


def _stage_fns(stage, side, arrays, training):
    """The function that runs ``stage`` on one side (None: the stage does not apply)."""
    fx, lib, mod = side.fx, side.lib, side.mod
    floats = [i for i, a in enumerate(arrays) if np.issubdtype(a.dtype, np.floating)]
    has_params = any(True for _ in mod.parameters())
    has_buffers = any(True for _ in mod.buffers())
    # a parameterless module differentiates with respect to its input
    if stage == "call":
        params, buffers = _random_state(mod, 3)

        def run():
            p, b = _as(side, params), _as(side, buffers)
            out = side.functional(p, b, [side.tensor(a) for a in arrays])
            return out, b, _state(mod)
        return run
    if stage == "strict":
        if not has_params and not has_buffers:
            return None

        def run():
            p, b = _state(mod)
            x = [side.tensor(a) for a in arrays]
            full = fx.functional_call(mod, {**p, **b}, *_args(side, x), strict=True)
            try:
                fx.functional_call(mod, p, *_args(side, x), strict=True)
            except RuntimeError as ex:
                partial = f"raises {type(ex).__name__}"
            else:
                partial = "runs"
            return full, partial
        return run
    if stage == "tied":
        if not has_params:
            return None
        params, _ = _random_state(mod, 4)

        def run():
            twice = _Twice.build(lib, mod)
            given = {f"b.{n}": t for n, t in _as(side, params).items()}
            x = [side.tensor(a) for a in arrays]
            tied = fx.functional_call(twice, given, *_args(side, x))
            untied = fx.functional_call(twice, given, *_args(side, x), tie_weights=False)
            return tied, untied
        return run
    if stage == "psg":
        first = floats[:1]
        if not has_params and not first:
            return None

        def loss(p, b, *x):
            return _loss(lib, side.functional(p, b, list(x)))

        def run():
            p, b = _state(mod)
            x = [side.tensor(_batched(a, 0)) for a in arrays]
            argnums = (0, 2 + first[0]) if first else 0
            dims = (None, None) + (0,) * len(x)
            grads = fx.vmap(fx.grad(loss, argnums=argnums), in_dims=dims)(p, b, *x)
            return grads, _state(mod)[1]
        return run
    if stage in ("vmap0", "vmap_last"):
        def run():
            last = stage == "vmap_last"
            x = [side.tensor(_batched(a, a.ndim if last else 0)) for a in arrays]
            dims = [-1 if last else 0 for _ in x]
            out = fx.vmap(lambda *xs: side.call(mod, list(xs)), in_dims=tuple(dims),
                          out_dims=-1 if last else 0)(*x)
            return out, _state(mod)[1]
        return run
    if stage == "ensemble":
        if not has_params:
            return None

        def run():
            p, b = _state(mod)
            other = {n: t * 0.9 for n, t in p.items()}
            first_copy = _copy_with(side, mod, p)
            second_copy = _copy_with(side, mod, other)
            sp, sb = fx.stack_module_state([first_copy, second_copy])
            x = [side.tensor(a) for a in arrays]
            out = fx.vmap(lambda pp, bb, *xs: side.functional(pp, bb, list(xs)),
                          in_dims=(0, 0) + (None,) * len(x))(sp, sb, *x)
            return out, sb
        return run
    if stage == "jacrev":
        if not floats or arrays[floats[0]].size > JAC_MAX or arrays[floats[0]].size == 0:
            return None
        i = floats[0]

        def run():
            x = [side.tensor(a) for a in arrays]

            def f(xi):
                xs = list(x)
                xs[i] = xi
                return tuple(o for o in _flat(side.call(mod, xs))
                             if isinstance(o, lib.Tensor) and o.is_floating_point())
            return fx.jacrev(f)(x[i]), _state(mod)[1]
        return run
    raise ValueError(stage)


def _args(side, tensors):
    args, kwargs = _fill(side.skeleton, tensors, side.conv)
    return tuple(args), kwargs


def _copy_with(side, mod, params):
    """A deep copy of ``mod`` holding ``params`` (so two models can be stacked)."""
    import copy
    m = copy.deepcopy(mod)
    with side.lib.no_grad():
        for n, p in m.named_parameters():
            p.copy_(params[n])
    return m


def run_case(info, sample, dtype, training, stages=STAGES):
    """``{stage: (messages, fallback warnings)}`` for one case, or a string saying why it
    does not run."""
    built = build_sides(info, sample, dtype, training)
    if isinstance(built, str):
        return built
    t_side, e_side, arrays = built
    loop_side = _Side(torch, t_side.mod, t_side.skeleton, t_side.conv, _TorchLoop)
    res = {}
    for stage in stages:
        t_fn = _stage_fns(stage, t_side, arrays, training)
        e_fn = _stage_fns(stage, e_side, arrays, training)
        if t_fn is None:
            continue
        loop_fn = _stage_fns(stage, loop_side, arrays, training)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            msgs, fell, results = _both(stage, t_fn, e_fn, loop_fn)
            if results is not None and dtype == torch.float32 and msgs and all(
                    ": values (" in m for m in msgs):
                msgs = _weigh(info, sample, training, stage, arrays, results, msgs)
        res[stage] = (msgs, fell)
    return res


def _weigh(info, sample, training, stage, arrays, results, msgs):
    """Keep float32 value differences only where ember is further from torch's float64
    result (same parameters and inputs) than twice torch's own float32 result is, and
    than 1e-5 of the result's magnitude."""
    mod = build_torch(info, sample, torch.float32, training)
    wide = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
    side = _Side(torch, mod, _skeleton_of(sample),
                 lambda x: x)
    if _is_lazy(mod):
        with torch.no_grad():
            side.call(mod, [side.tensor(a) for a in arrays])
    mod.double()
    torch.manual_seed(0)
    try:
        ref = _stage_fns(stage, side, wide, training)()
    except Exception:  # no reference: the differences stand
        return msgs
    e_res, t_res = (_flat_all(r) for r in results)
    ref = _flat_all(ref)
    if len(ref) != len(e_res):
        return msgs
    for e, t, r in zip(e_res, t_res, ref):
        if isinstance(r, torch.Tensor) and r.is_floating_point():
            r = r.detach().numpy()
            e_err = _distance(e.detach().numpy(), r)
            t_err = _distance(t.detach().numpy(), r)
            # float32 rounding: no further than twice torch's own distance, or than
            # 1e-5 of the result's magnitude (a long float32 chain: attention, norms)
            if e_err > max(2 * t_err, 1e-5 * max(1.0, float(np.nanmax(np.abs(r), initial=0)))):
                return [m + f"; from float64: ember {e_err:.2g}, torch {t_err:.2g}"
                        for m in msgs]
    return []


def _skeleton_of(sample):
    return _skeleton((sample.forward_input.args, sample.forward_input.kwargs), [])


def _flat_all(x):
    if isinstance(x, dict):
        return [o for v in x.values() for o in _flat_all(v)]
    if isinstance(x, (tuple, list)):
        return [o for v in x for o in _flat_all(v)]
    return [x]


def _distance(a, ref):
    a = a.astype(np.float64)
    if a.shape != ref.shape or not np.array_equal(np.isnan(a), np.isnan(ref)):
        return float("inf")
    ok = ~np.isnan(ref)
    with np.errstate(invalid="ignore"):
        d = np.abs(a[ok] - ref[ok])
    return float(np.nanmax(d, initial=0.0)) if d.size else 0.0
