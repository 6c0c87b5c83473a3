"""Run one sample of PyTorch's ModuleInfo table (``module_db``) on ember and on torch.

A case is one ``ModuleInput`` of one ``ModuleInfo`` for a dtype (float32, float64) and
a mode (train, eval). The torch module is built as PyTorch's own module tests build it
(seeded, ``.to(dtype)``); ember's module of the same name is built from the same
constructor arguments, converted (tensors, dtypes, functions, and the torch modules a
sample passes as arguments: those are rebuilt from the arguments they were made with),
and loaded with torch's ``state_dict()``. What is compared, in this order: the
``state_dict()`` keys (order too), parameter names, shapes, dtypes and requires_grad,
the module's ``repr``, the forward outputs
(nested tuples: type, shape, dtype, values at ``torch.testing``'s tolerances for the
dtype), the output's node name, the gradients of the inputs and of every parameter for
one seeded output gradient (``None`` and zeros are different), and the buffers after
the forward. An error on either side is an outcome too: the ember exception must be an
instance of torch's class.

``ModuleErrorInput`` rows (``module_error_inputs_func``) are checked as PyTorch's tests
check them: the construction or the forward raises an instance of the declared class,
with a message matching the declared pattern.
"""
import contextlib
import functools
import re
import types
import weakref

import numpy as np
import torch
import torch.nn.functional as torch_F
from torch.testing._internal.common_modules import ModuleErrorEnum, module_db

import ember

DTYPES = (torch.float32, torch.float64)
MODES = (True, False)
# float32 value differences found to be rounding no worse than torch's own (``weigh``)
WEIGHED = [0]

# constructor arguments of every torch module made while a sample list is built, so a
# module passed as an argument (TransformerEncoder's layer) can be rebuilt in ember
_MADE_WITH = weakref.WeakKeyDictionary()


def _module_classes():
    return [c for c in vars(torch.nn).values()
            if isinstance(c, type) and issubclass(c, torch.nn.Module) and "__init__" in vars(c)]


def _recorder(init):
    @functools.wraps(init)
    def recording_init(self, *args, **kwargs):
        # the outermost constructor is the one the sample called
        _MADE_WITH.setdefault(self, (args, kwargs))
        init(self, *args, **kwargs)
    return recording_init


@contextlib.contextmanager
def _recording_constructors():
    saved = {c: vars(c)["__init__"] for c in _module_classes()}
    for c, init in saved.items():
        c.__init__ = _recorder(init)
    try:
        yield
    finally:
        for c, init in saved.items():
            c.__init__ = init


def infos():
    """The ModuleInfo entries by class name (names are unique in torch 2.13's table)."""
    return {info.module_cls.__name__: info for info in module_db}


def samples(info, dtype, training):
    """The table's samples for ``info`` (seeded, so each call gives the same tensors)."""
    torch.manual_seed(0)
    with _recording_constructors():
        return info.module_inputs_func(info, device="cpu", dtype=dtype,
                                       requires_grad=True, training=training)


def error_samples(info, training):
    """The table's error rows for ``info`` (float32, as PyTorch's own test runs them)."""
    if info.module_error_inputs_func is None:
        return []
    torch.manual_seed(0)
    return info.module_error_inputs_func(info, device="cpu", dtype=torch.float32,
                                         requires_grad=True, training=training)


def _ember_dtype(dt):
    return getattr(ember, str(dt).split(".")[-1])


def to_ember(x, memo):
    """ember's counterpart of a sample's argument; one torch tensor gives one ember tensor."""
    if isinstance(x, torch.Tensor):
        if id(x) not in memo:
            data = x.detach()
            e = ember.from_numpy(data.numpy().copy())
            if x.requires_grad:
                e.requires_grad_(True)
            memo[id(x)] = (x, e)
        return memo[id(x)][1]
    if isinstance(x, torch.dtype):
        return _ember_dtype(x)
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, tuple):
        return tuple(to_ember(v, memo) for v in x)
    if isinstance(x, list):
        return [to_ember(v, memo) for v in x]
    if isinstance(x, dict):
        return {k: to_ember(v, memo) for k, v in x.items()}
    if isinstance(x, torch.nn.Module):
        if x not in _MADE_WITH:
            raise TypeError(f"no constructor record for the torch module {type(x).__name__}")
        args, kwargs = _MADE_WITH[x]
        e = getattr(ember.nn, type(x).__name__)(*to_ember(args, memo),
                                                **to_ember(kwargs, memo))
        _load(e, x)
        return e
    if isinstance(x, (types.FunctionType, types.BuiltinFunctionType, functools.partial)):
        name = getattr(x, "__name__", None)
        if name is not None and getattr(torch_F, name, None) is x:
            return getattr(ember.nn.functional, name)
        if name is not None and getattr(torch, name, None) is x:
            return getattr(ember, name)
        raise TypeError(f"no ember counterpart for the function {x!r}")
    return x


def torch_leaves(x, memo, strided=None):
    """The forward input with each tensor that requires grad made a leaf (a sample may
    pass ``make_input(...).log()``): ember's converted inputs are leaves, so both sides
    take their gradients at the same place.

    ``strided``: ember's conversion memo; then every non-empty tensor of one or more
    dims becomes a view with stride 2 in its last dim (of a leaf twice as wide) on both
    sides, made here for both, with its gradient retained."""
    if isinstance(x, torch.Tensor):
        if id(x) in memo:
            return memo[id(x)]
        if strided is not None and x.dim() >= 1 and x.numel() > 0:
            memo[id(x)] = view = _strided(torch, x.detach().numpy(), x.requires_grad)
            strided[id(view)] = (view, _strided(ember, x.detach().numpy(), x.requires_grad))
        elif x.requires_grad:
            memo[id(x)] = x.detach().requires_grad_(True)
        return memo.get(id(x), x)
    if isinstance(x, (tuple, list)):
        return type(x)(torch_leaves(v, memo, strided) for v in x)
    if isinstance(x, dict):
        return {k: torch_leaves(v, memo, strided) for k, v in x.items()}
    return x


def _strided(lib, a, requires_grad):
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=a.dtype)
    wide[..., ::2] = a
    base = lib.from_numpy(wide)
    if requires_grad:
        base.requires_grad_(True)
    view = base[..., ::2]
    if requires_grad:
        view.retain_grad()
    return view


def _np(t):
    return t.detach().numpy()


def _to_torch(e):
    return torch.from_numpy(np.array(e.detach().numpy(), copy=True))


def _load(e_mod, t_mod):
    sd = {k: ember.from_numpy(_np(v).copy()) for k, v in t_mod.state_dict().items()}
    e_mod.load_state_dict(sd)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [o for v in x for o in _flat(v)]
    if isinstance(x, dict):
        return [o for v in x.values() for o in _flat(v)]
    return [x]


def _err(e):
    first = str(e).splitlines()[0][:150] if str(e) else ""
    return f"{type(e).__name__}: {first}"


def _same_exc(e_exc, t_exc):
    """torch's exception class among ember's bases (PyTorch's own RuntimeError family
    names NotImplementedError and the like as RuntimeError subclasses)."""
    return isinstance(e_exc, type(t_exc))


class _Differences:
    """What differs on one case: messages, and float32 value differences held back until
    they are weighed against a float64 run (rounding that is no worse than torch's own
    is not a difference)."""

    def __init__(self):
        self.messages = []
        self.values = []  # (what, ember array, torch array, detail)

    def tensor(self, e, t, what):
        if not isinstance(e, ember.Tensor):
            self.messages.append(f"{what}: ember gives {type(e).__name__}, torch a Tensor")
            return
        if tuple(e.shape) != tuple(t.shape):
            self.messages.append(f"{what}: shape {tuple(e.shape)} != {tuple(t.shape)}")
            return
        if _ember_dtype(t.dtype) != e.dtype:
            self.messages.append(f"{what}: dtype {e.dtype} != {t.dtype}")
            return
        try:
            torch.testing.assert_close(_to_torch(e), t.detach(), equal_nan=True)
        except AssertionError as ex:
            lines = [s.strip() for s in str(ex).splitlines() if "difference" in s]
            self.values.append((what, _np(e), _np(t), "; ".join(lines)[:160]))

    def structure(self, e, t, what):
        """Compare the nesting of outputs: tuples, None and Python values (the tensors
        in it are compared one by one, flattened)."""
        if isinstance(t, torch.Tensor):
            if not isinstance(e, ember.Tensor):
                self.messages.append(f"{what}: ember gives {type(e).__name__}, torch a Tensor")
        elif isinstance(t, (tuple, list)):
            if not isinstance(e, (tuple, list)) or len(e) != len(t):
                self.messages.append(f"{what}: ember gives {type(e).__name__}, torch a "
                                     f"{type(t).__name__} of {len(t)}")
                return
            for i, (a, b) in enumerate(zip(e, t)):
                self.structure(a, b, f"{what}[{i}]")
        elif t is None:
            if e is not None:
                self.messages.append(f"{what}: ember gives {type(e).__name__}, torch None")
        elif isinstance(e, ember.Tensor) or e != t:
            self.messages.append(f"{what}: {e!r} != {t!r}")

    def grad(self, e, t, what):
        if t is None or e is None:
            if t is not None or e is not None:
                self.messages.append(f"{what}: ember {'None' if e is None else 'a tensor'}, "
                                     f"torch {'None' if t is None else 'a tensor'}")
            return
        self.tensor(e, t, what)

    def weigh(self, reference):
        """Keep a float32 value difference only where ember is further from the float64
        result than twice torch's own distance from it."""
        for what, e, t, detail in self.values:
            ref = reference.get(what) if reference is not None else None
            if ref is not None and ref.shape == e.shape:
                e_err = _distance(e, ref)
                t_err = _distance(t, ref)
                if e_err <= 2 * t_err:
                    WEIGHED[0] += 1
                    continue
                detail += f"; from float64: ember {e_err:.2g}, torch {t_err:.2g}"
            self.messages.append(f"{what}: values ({detail})")
        self.values = []


def _distance(a, ref):
    a = a.astype(np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(ref)):
        return float("inf")
    ok = ~np.isnan(ref)
    with np.errstate(invalid="ignore"):
        d = np.abs(a[ok] - ref[ok])
    return float(np.nanmax(d, initial=0.0)) if d.size else 0.0


def _node_name(t):
    g = t.grad_fn
    return None if g is None else g.name()


def _forward(mod, fwd, memo, conv):
    args = conv(fwd.args, memo) if conv else fwd.args
    kwargs = conv(fwd.kwargs, memo) if conv else fwd.kwargs
    return mod(*args, **kwargs)


def _is_lazy(mod):
    return any(isinstance(p, torch.nn.parameter.UninitializedParameter)
               for p in mod.parameters())


def build_torch(info, sample, dtype, training):
    """torch's module for a sample, as PyTorch's module tests build it."""
    torch.manual_seed(0)
    ci = sample.constructor_input
    mod = info.module_cls(*ci.args, **ci.kwargs)
    mod.to(dtype)
    mod.train(training)
    return mod


def build_ember(info, sample, dtype, training, memo):
    """ember's module of the same name from the converted constructor arguments."""
    ci = sample.constructor_input
    cls = getattr(ember.nn, info.module_cls.__name__)
    mod = cls(*to_ember(ci.args, memo), **to_ember(ci.kwargs, memo))
    mod.to(_ember_dtype(dtype))
    mod.train(training)
    return mod


def _input_leaves(fwd):
    """The distinct tensors of a forward input that require grad, in argument order."""
    seen = {}
    for x in _flat([fwd.args, fwd.kwargs]):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            seen.setdefault(id(x), x)
    return list(seen.values())


def _output_grads(outs):
    """One seeded output gradient per differentiable output (float64 NumPy arrays)."""
    rng = np.random.default_rng(1)
    return [rng.standard_normal(tuple(o.shape)) for o in outs]


def _differentiable(flat):
    return [o for o in flat if isinstance(o, torch.Tensor) and o.requires_grad]


def _reference(info, sample, training, fwd):
    """torch's results in float64 from the float32 case's parameters and inputs."""
    mod = build_torch(info, sample, torch.float32, training)
    memo = {}

    def up(x):
        if isinstance(x, torch.Tensor):
            if id(x) not in memo:
                y = x.detach().double() if x.is_floating_point() else x
                memo[id(x)] = y.requires_grad_(True) if x.requires_grad else y
            return memo[id(x)]
        if isinstance(x, (tuple, list)):
            return type(x)(up(v) for v in x)
        if isinstance(x, dict):
            return {k: up(v) for k, v in x.items()}
        return x

    if _is_lazy(mod):
        with torch.no_grad():
            mod(*fwd.args, **fwd.kwargs)
    mod.double()
    flat = _flat(mod(*up(fwd.args), **up(fwd.kwargs)))
    ref = {f"out{i}": _np(o) for i, o in enumerate(flat) if isinstance(o, torch.Tensor)}
    ref.update({f"buffer {n}": _np(b) for n, b in mod.named_buffers()})
    outs = _differentiable(flat)
    if outs:
        torch.autograd.backward(outs, [torch.from_numpy(g) for g in _output_grads(outs)])
    for i, x in enumerate(_input_leaves(fwd)):
        if memo[id(x)].grad is not None:
            ref[f"input{i}.grad"] = _np(memo[id(x)].grad)
    ref.update({f"{n}.grad": _np(p.grad) for n, p in mod.named_parameters()
                if p.grad is not None})
    return ref


def run_case(info, sample, dtype, training, strided=False):
    """The differences between ember and torch on one sample: a list of strings.
    ``strided``: the inputs as views with stride 2 in their last dim."""
    try:
        t_mod = build_torch(info, sample, dtype, training)
    except Exception as ex:  # the outcome compared
        t_build = ex
    else:
        t_build = None
    memo = {}
    try:
        e_mod = build_ember(info, sample, dtype, training, memo)
    except Exception as ex:
        if t_build is None:
            return [f"construct: ember raises {_err(ex)}"]
        return [] if _same_exc(ex, t_build) else \
            [f"construct: ember raises {_err(ex)}, torch {_err(t_build)}"]
    if t_build is not None:
        return [f"construct: torch raises {_err(t_build)}, ember does not"]

    leaves = {}
    views = memo if strided else None
    fwd = types.SimpleNamespace(args=torch_leaves(sample.forward_input.args, leaves, views),
                                kwargs=torch_leaves(sample.forward_input.kwargs, leaves,
                                                    views))
    if _is_lazy(t_mod):
        # a lazy module takes its shapes from a first call; make both, then copy
        with torch.no_grad():
            _forward(t_mod, fwd, None, None)
        with ember.no_grad():
            _forward(e_mod, fwd, {}, to_ember)
    t_keys = list(t_mod.state_dict().keys())
    e_keys = list(e_mod.state_dict().keys())
    if t_keys != e_keys:
        return [f"state_dict keys: {e_keys} != {t_keys}"]
    t_shapes = [(n, tuple(p.shape), str(p.dtype)[6:], p.requires_grad)
                for n, p in t_mod.named_parameters()]
    e_shapes = [(n, tuple(p.shape), str(p.dtype)[6:], p.requires_grad)
                for n, p in e_mod.named_parameters()]
    if t_shapes != e_shapes:
        return [f"parameters: {e_shapes} != {t_shapes}"]
    if repr(e_mod) != repr(t_mod):
        return [f"repr: {repr(e_mod)[:150]!r} != {repr(t_mod)[:150]!r}"]
    try:
        _load(e_mod, t_mod)
    except Exception as ex:
        return [f"load_state_dict: ember raises {_err(ex)}"]

    try:
        t_out = _forward(t_mod, fwd, None, None)
    except Exception as ex:
        t_out, t_exc = None, ex
    else:
        t_exc = None
    try:
        e_out = _forward(e_mod, fwd, memo, to_ember)
    except Exception as ex:
        if t_exc is None:
            return [f"forward: ember raises {_err(ex)}"]
        return [] if _same_exc(ex, t_exc) else \
            [f"forward: ember raises {_err(ex)}, torch {_err(t_exc)}"]
    if t_exc is not None:
        return [f"forward: torch raises {_err(t_exc)}, ember does not"]

    diffs = _Differences()
    diffs.structure(e_out, t_out, "out")
    if diffs.messages:
        return diffs.messages
    t_flat, e_flat = _flat(t_out), _flat(e_out)
    for i, (a, b) in enumerate(zip(e_flat, t_flat)):
        if isinstance(b, torch.Tensor):
            diffs.tensor(a, b, f"out{i}")
            if a.requires_grad != b.requires_grad:
                diffs.messages.append(f"out{i}: requires_grad {a.requires_grad} != "
                                      f"{b.requires_grad}")
            elif b.grad_fn is not None and _node_name(a) != _node_name(b):
                diffs.messages.append(f"out{i}: grad_fn {_node_name(a)} != {_node_name(b)}")
    for (n, tb), (_, eb) in zip(t_mod.named_buffers(), e_mod.named_buffers()):
        diffs.tensor(eb, tb, f"buffer {n}")
    if not diffs.messages:
        _backward(t_mod, e_mod, t_flat, e_flat, fwd, memo, diffs)
    if diffs.values and dtype == torch.float32:
        diffs.weigh(_reference(info, sample, training, fwd))
    else:
        diffs.weigh(None)
    return diffs.messages


def _backward(t_mod, e_mod, t_flat, e_flat, fwd, memo, diffs):
    pairs = [(a, b) for a, b in zip(e_flat, t_flat)
             if isinstance(b, torch.Tensor) and b.requires_grad]
    if not pairs:
        return
    gos = _output_grads([b for _, b in pairs])
    try:
        torch.autograd.backward([b for _, b in pairs],
                                [torch.from_numpy(g).to(b.dtype) for g, (_, b) in zip(gos, pairs)])
    except Exception as ex:
        t_exc = ex
    else:
        t_exc = None
    try:
        ember.autograd.backward([a for a, _ in pairs],
                                [ember.from_numpy(g).to(a.dtype) for g, (a, _) in zip(gos, pairs)])
    except Exception as ex:
        if t_exc is None:
            diffs.messages.append(f"backward: ember raises {_err(ex)}")
        elif not _same_exc(ex, t_exc):
            diffs.messages.append(f"backward: ember raises {_err(ex)}, torch {_err(t_exc)}")
        return
    if t_exc is not None:
        diffs.messages.append(f"backward: torch raises {_err(t_exc)}, ember does not")
        return
    for i, t_in in enumerate(_input_leaves(fwd)):
        diffs.grad(memo[id(t_in)][1].grad, t_in.grad, f"input{i}.grad")
    e_params = dict(e_mod.named_parameters())
    for n, p in t_mod.named_parameters():
        diffs.grad(e_params[n].grad, p.grad, f"{n}.grad")


def run_error_case(info, err):
    """'' when ember raises as PyTorch's error row says, else what differs."""
    sample = err.module_error_input
    memo = {}
    at_construction = err.error_on == ModuleErrorEnum.CONSTRUCTION_ERROR
    where = "construct" if at_construction else "forward"
    ci = sample.constructor_input
    cls = getattr(ember.nn, info.module_cls.__name__)
    try:
        mod = cls(*to_ember(ci.args, memo), **to_ember(ci.kwargs, memo))
    except Exception as ex:
        if not at_construction:
            return f"construct: ember raises {_err(ex)}, torch only in the forward"
        raised = ex
    else:
        if at_construction:
            return f"construct: ember does not raise ({err.error_type.__name__} expected)"
        try:
            _forward(mod, sample.forward_input, memo, to_ember)
        except Exception as ex:
            raised = ex
        else:
            return f"forward: ember does not raise ({err.error_type.__name__} expected)"
    return _check_raised(raised, err, where)


def _check_raised(ex, err, where):
    if not isinstance(ex, err.error_type):
        return f"{where}: ember raises {_err(ex)}, torch {err.error_type.__name__}"
    if not re.search(err.error_regex, str(ex)):
        return f"{where}: message {str(ex)[:150]!r} does not match {err.error_regex!r}"
    return ""
