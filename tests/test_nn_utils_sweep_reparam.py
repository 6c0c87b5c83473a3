"""torch.nn.utils' reparametrizations swept against torch: weight and spectral norm (the
parametrizations and the legacy hooks; seeded power iteration, eval mode, state dicts
through torch.save and ember.load both ways), ``orthogonal`` over every map with and
without trivialization, ``parametrize`` (right_inverse, cached, removal) and ``prune``.

The comparison is tests/nn_utils_sweep.py's; ``python tests/test_nn_utils_sweep_reparam.py``
prints a summary.
"""
import io
import math

import pytest
import torch
import torch.nn.utils.prune  # noqa: F401  (torch does not import it with nn.utils)
from nn_utils_sweep import Cases, Raised, check, grads, inputs, linear, report

import ember

INF = math.inf
CASES = Cases()
case = CASES.add


# ------------------------------------------------------------------ weight norm

def _round_trip(src_lib, dst_lib, build):
    """``build``'s state dict from ``src_lib`` saved with its save, loaded with
    ``dst_lib.load`` into ``dst_lib``'s module of the same build."""
    src_lib.manual_seed(0)
    src = build(src_lib)
    src(inputs(src_lib, 2, *_IN_SHAPE.get(id(build), (4,))))
    buf = io.BytesIO()
    src_lib.save(src.state_dict(), buf)
    buf.seek(0)
    dst_lib.manual_seed(1)
    dst = build(dst_lib)
    result = dst.load_state_dict(dst_lib.load(buf))
    return src, dst, result


_IN_SHAPE = {}


def _state_round_trips(build, in_shape=(4,), train=False):
    """Cases: ``build`` saved by torch and loaded by ember, and the other way; the
    loaded module's state dict and its forward must equal the saved one's."""
    _IN_SHAPE[id(build)] = in_shape

    def run(m):
        other = torch if m is ember else ember
        src, dst, result = _round_trip(other, m, build)
        src.train(train)
        dst.train(train)
        x = inputs(m, 2, *in_shape)
        return (list(result.missing_keys), list(result.unexpected_keys), dst.state_dict(),
                dst(x))
    return run


def _wn_param(m):
    return m.nn.utils.parametrizations.weight_norm(linear(m, 4, 3))


def _wn_legacy(m):
    return m.nn.utils.weight_norm(linear(m, 4, 3))


def _sn_param(m):
    return m.nn.utils.parametrizations.spectral_norm(linear(m, 4, 5), n_power_iterations=3)


def _sn_legacy(m):
    return m.nn.utils.spectral_norm(linear(m, 4, 5), n_power_iterations=2)


def _sn_conv(m):
    return m.nn.utils.parametrizations.spectral_norm(m.nn.Conv2d(2, 3, 2))


for _name, _build, _shape in (("weight_norm", _wn_param, (4,)),
                              ("legacy weight_norm", _wn_legacy, (4,)),
                              ("spectral_norm", _sn_param, (4,)),
                              ("legacy spectral_norm", _sn_legacy, (4,)),
                              ("conv spectral_norm", _sn_conv, (2, 3, 3))):
    for _train in (False, True):
        CASES[f"{_name} state_dict across libraries, train={_train}"] = (
            _state_round_trips(_build, _shape, _train), 1e-5)


@case("legacy weight_norm state_dict into parametrizations.weight_norm")
def _(m):
    src = m.nn.utils.weight_norm(linear(m, 4, 3))
    dst = m.nn.utils.parametrizations.weight_norm(m.nn.Linear(4, 3))
    result = dst.load_state_dict(src.state_dict())
    return list(result.missing_keys), dst.state_dict(), dst(inputs(m, 2, 4))


def _weight_norm_dim_case(dim):
    def run(m):
        mod = m.nn.utils.parametrizations.weight_norm(m.nn.Conv1d(2, 3, 2), dim=dim)
        y = mod(inputs(m, 2, 2, 5))
        y.pow(2).sum().backward()
        return (y, mod.weight, mod.state_dict(), grads(mod.parameters()))
    return run


for _dim in (0, 1, 2, -1, -2, None):
    CASES[f"weight_norm dim={_dim}"] = (_weight_norm_dim_case(_dim), 1e-5)


@case("legacy weight_norm: names, forward, backward, remove")
def _(m):
    mod = m.nn.utils.weight_norm(m.nn.Conv1d(2, 3, 2), dim=None)
    y = mod(inputs(m, 2, 2, 5))
    y.pow(2).sum().backward()
    out = [y, mod.weight, mod.state_dict(), [p.grad for p in mod.parameters()]]
    m.nn.utils.remove_weight_norm(mod)
    return out + [mod.state_dict()]


for _dim in (0, 1, 2, -2, None):
    def _legacy_wn_case(m, dim=_dim):
        mod = m.nn.utils.weight_norm(m.nn.Conv1d(2, 3, 2), dim=dim)
        y = mod(inputs(m, 2, 2, 5))
        y.pow(2).sum().backward()
        return y, mod.weight, mod.state_dict(), [p.grad for p in mod.parameters()]
    CASES[f"legacy weight_norm dim={_dim}"] = (_legacy_wn_case, 1e-5)


@case("weight_norm of float16 weights")
def _(m):
    mod = m.nn.utils.parametrizations.weight_norm(linear(m, 3, 2).half())
    return mod.weight, mod.state_dict()


@case("norm_except_dim and _weight_norm", tol=1e-5)
def _(m):
    v = inputs(m, 3, 4, 2).requires_grad_()
    g = inputs(m, 1, 4, 1, seed=2).requires_grad_()
    w = [m._weight_norm(v, g, 1), m._weight_norm(v, g.reshape(1, 1, 2)[..., :1] + 0 * g[:, :1],
                                                 -1)]
    sum(t.sum() for t in w).backward()
    return ([m.norm_except_dim(v, 2, d) for d in (0, 1, 2, -1, -2, -3)]
            + [m.norm_except_dim(v, 3, 1)] + w + [v.grad, g.grad])


def _weight_norm_gradgrad_case(dim):
    def run(m):
        v = inputs(m, 3, 4, 2).requires_grad_()
        shape = [1, 1, 1] if dim == -1 else [v.shape[d] if d == dim % 3 else 1
                                               for d in range(3)]
        g = inputs(m, *shape, seed=2).requires_grad_()
        w = m._weight_norm(v, g, dim)
        gv, gg = m.autograd.grad((w * inputs(m, 3, 4, 2, seed=5)).sum(), (v, g),
                                 create_graph=True)
        (gv.pow(2).sum() + gg.pow(2).sum()).backward()
        # (the first derivatives' own nodes are the composite's: not compared)
        return w, gv.detach(), gg.detach(), v.grad, g.grad
    return run


for _dim in (0, 1, 2, -1):
    CASES[f"weight_norm second derivatives dim={_dim}"] = (
        _weight_norm_gradgrad_case(_dim), 1e-5)


@case("saving a whole parametrized module")
def _(m):
    m.save(m.nn.utils.parametrizations.weight_norm(linear(m, 2, 2)), io.BytesIO())


@case("legacy weight_norm module deep-copied and saved whole")
def _(m):
    import copy
    mod = m.nn.utils.weight_norm(linear(m, 3, 2))
    twin = copy.deepcopy(mod)
    buf = io.BytesIO()
    m.save(twin, buf)
    buf.seek(0)
    loaded = m.load(buf, weights_only=False)
    x = inputs(m, 2, 3)
    return twin(x), loaded(x), loaded.state_dict()


@case("legacy weight_norm of a lazy module")
def _(m):
    m.nn.utils.weight_norm(m.nn.LazyLinear(3))


@case("legacy spectral_norm of a lazy module")
def _(m):
    m.nn.utils.spectral_norm(m.nn.LazyLinear(3))


@case("parametrizations.weight_norm of a lazy module")
def _(m):
    m.nn.utils.parametrizations.weight_norm(m.nn.LazyLinear(3))


@case("parametrizations.spectral_norm of a lazy module")
def _(m):
    m.nn.utils.parametrizations.spectral_norm(m.nn.LazyLinear(3))


@case("register_parametrization on a lazy module's weight")
def _(m):
    m.nn.utils.parametrize.register_parametrization(m.nn.LazyLinear(3), "weight", m.nn.Tanh())


for _method in ("l1_unstructured", "random_unstructured", "identity", "global"):
    def _lazy_prune_case(m, method=_method):
        p, lin = m.nn.utils.prune, m.nn.LazyLinear(3)
        if method == "identity":
            p.identity(lin, "weight")
        elif method == "global":
            p.global_unstructured([(lin, "weight")], pruning_method=p.L1Unstructured,
                                  amount=0.5)
        else:
            getattr(p, method)(lin, "weight", 0.5)
    CASES[f"prune {_method} of a lazy module"] = (_lazy_prune_case, 1e-6)


for _dim in (3, -4):
    def _norm_except_dim_range_case(m, dim=_dim):
        return m.norm_except_dim(inputs(m, 3, 4, 2), 2, dim)
    CASES[f"norm_except_dim with dim={_dim} out of range"] = (_norm_except_dim_range_case,
                                                              1e-6)


@case("weight_norm twice on one name")
def _(m):
    mod = m.nn.utils.weight_norm(linear(m, 2, 2))
    m.nn.utils.weight_norm(mod)


# ---------------------------------------------------------------- spectral norm

def _sn_steps(build, steps, in_shape=(4,), train=True):
    def run(m):
        mod = build(m)
        mod.train(train)
        out = []
        for _ in range(steps):
            y = mod(inputs(m, 2, *in_shape))
            y.pow(2).sum().backward()
            out.append(y)
        return out, mod.state_dict(), [p.grad for p in mod.parameters()]
    return run


for _n in (1, 3):
    for _train in (True, False):
        CASES[f"spectral_norm n_power_iterations={_n} train={_train}"] = (
            _sn_steps(lambda m, n=_n: m.nn.utils.parametrizations.spectral_norm(
                linear(m, 4, 5), n_power_iterations=n), 2, train=_train), 1e-5)
        CASES[f"legacy spectral_norm n_power_iterations={_n} train={_train}"] = (
            _sn_steps(lambda m, n=_n: m.nn.utils.spectral_norm(
                linear(m, 4, 5), n_power_iterations=n), 2, train=_train), 1e-5)
CASES["spectral_norm dim=1 on a ConvTranspose1d"] = (
    _sn_steps(lambda m: m.nn.utils.parametrizations.spectral_norm(
        m.nn.ConvTranspose1d(2, 3, 2)), 2, in_shape=(2, 4)), 1e-5)
CASES["legacy spectral_norm on a ConvTranspose1d"] = (
    _sn_steps(lambda m: m.nn.utils.spectral_norm(m.nn.ConvTranspose1d(2, 3, 2)), 2,
              in_shape=(2, 4)), 1e-5)
CASES["spectral_norm of a 1-D parameter"] = (
    _sn_steps(lambda m: m.nn.utils.parametrizations.spectral_norm(
        linear(m, 4, 5), name="bias"), 1), 1e-5)


@case("legacy spectral_norm with dim=1 and eps")
def _(m):
    mod = m.nn.utils.spectral_norm(linear(m, 4, 5), dim=1, eps=1e-3)
    y = mod(inputs(m, 2, 4))
    return y, mod.state_dict()


for _legacy in (False, True):
    for _dim in (-1, -2, 2):
        def _sn_dim_case(m, legacy=_legacy, dim=_dim):
            fn = (m.nn.utils.spectral_norm if legacy
                  else m.nn.utils.parametrizations.spectral_norm)
            mod = fn(linear(m, 4, 5), dim=dim)
            y = mod(inputs(m, 2, 4))
            return y, mod.state_dict()
        CASES[f"{'legacy ' if _legacy else ''}spectral_norm dim={_dim}"] = (_sn_dim_case, 1e-5)


@case("spectral_norm of float64 weights", tol=1e-12)
def _(m):
    mod = m.nn.utils.parametrizations.spectral_norm(linear(m, 4, 5).double(), eps=1e-8)
    y = mod(inputs(m, 2, 4).double())
    y.sum().backward()
    return y, mod.state_dict(), grads(mod.parameters())


@case("legacy spectral_norm's state-dict metadata, before and after remove")
def _(m):
    net = m.nn.Sequential(m.nn.utils.spectral_norm(linear(m, 4, 5)), linear(m, 5, 2))
    before = dict(net.state_dict()._metadata)
    m.nn.utils.remove_spectral_norm(net[0])
    return before, dict(net.state_dict()._metadata)


@case("legacy hooks: the weight before the first forward")
def _(m):
    sn = m.nn.utils.spectral_norm(linear(m, 4, 5))
    wn = m.nn.utils.weight_norm(linear(m, 4, 5), dim=1)
    return (sn.weight, sn.weight.requires_grad, wn.weight, sorted(dict(sn.named_buffers())),
            [n for n, _ in wn.named_parameters()])


@case("spectral_norm with n_power_iterations=0")
def _(m):
    m.nn.utils.parametrizations.spectral_norm(m.nn.Linear(3, 3), n_power_iterations=0)


@case("legacy spectral_norm eval after training, then remove")
def _(m):
    mod = m.nn.utils.spectral_norm(linear(m, 4, 5))
    mod(inputs(m, 2, 4))
    mod.eval()
    y = mod(inputs(m, 2, 4))
    m.nn.utils.remove_spectral_norm(mod)
    return y, mod.state_dict(), mod(inputs(m, 2, 4))


# ------------------------------------------------------------------- orthogonal

def _orth_case(shape, omap, triv):
    def run(m):
        mod = m.nn.utils.parametrizations.orthogonal(linear(m, shape[1], shape[0]),
                                                     orthogonal_map=omap,
                                                     use_trivialization=triv)
        w = mod.weight
        y = mod(inputs(m, 3, shape[1]))
        y.pow(2).sum().backward()
        out = [w, y, mod.state_dict(), [p.grad for p in mod.parameters()]]
        # assigning an orthogonal matrix sets the original through right_inverse
        q = m.linalg.qr(inputs(m, *shape, seed=7) if shape[0] >= shape[1]
                        else inputs(m, shape[1], shape[0], seed=7).mT)[0]
        q = q if shape[0] >= shape[1] else q.mT
        try:
            mod.weight = q
        except Exception as exc:
            return out + [Raised(exc)]
        return out + [mod.weight]
    return run


for _shape in ((4, 4), (5, 3), (3, 5)):
    for _omap in ("matrix_exp", "cayley", "householder", None):
        for _triv in (True, False):
            CASES[f"orthogonal {_shape} {_omap} use_trivialization={_triv}"] = (
                _orth_case(_shape, _omap, _triv), 1e-5)


for _omap in ("matrix_exp", "cayley", "householder"):
    for _triv in (True, False):
        def _orth_batch_case(m, omap=_omap, triv=_triv):
            class Stack(m.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.weight = m.nn.Parameter(inputs(m, 2, 4, 3))

                def forward(self, x):
                    return x @ self.weight
            mod = m.nn.utils.parametrizations.orthogonal(Stack(), orthogonal_map=omap,
                                                         use_trivialization=triv)
            y = mod(inputs(m, 2, 5, 4, seed=3))
            y.pow(2).sum().backward()
            return mod.weight, y, [p.grad for p in mod.parameters()], mod.state_dict()
        CASES[f"orthogonal of a batch of matrices {_omap} use_trivialization={_triv}"] = (
            _orth_batch_case, 1e-5)


@case("orthogonal of float64 weights, already orthogonal", tol=1e-12)
def _(m):
    lin = linear(m, 4, 4).double()
    with m.no_grad():
        lin.weight.copy_(m.eye(4, dtype=m.float64).flip(0))
    mod = m.nn.utils.parametrizations.orthogonal(lin)
    return mod.weight, mod.state_dict()


@case("spectral_norm with dim=1 on a Linear", tol=1e-5)
def _(m):
    mod = m.nn.utils.parametrizations.spectral_norm(linear(m, 4, 5), dim=1)
    y = mod(inputs(m, 2, 4))
    y.sum().backward()
    return y, mod.state_dict(), grads(mod.parameters())


@case("orthogonal of a 1-D tensor")
def _(m):
    m.nn.utils.parametrizations.orthogonal(linear(m, 3, 3), name="bias")


@case("orthogonal with an unknown map")
def _(m):
    m.nn.utils.parametrizations.orthogonal(linear(m, 3, 3), orthogonal_map="qr")


# ---------------------------------------------------------------- parametrize

def _symmetric(m):
    class Symmetric(m.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).mT

        def right_inverse(self, a):
            return a.triu()
    return Symmetric()


def _scale_split(m):
    class ScaleSplit(m.nn.Module):
        def forward(self, a, b):
            return a * b

        def right_inverse(self, w):
            return w, m.ones_like(w)
    return ScaleSplit()


@case("register_parametrization: forward, backward, node names")
def _(m):
    mod = m.nn.utils.parametrize.register_parametrization(linear(m, 3, 3), "weight",
                                                          _symmetric(m))
    y = mod(inputs(m, 2, 3))
    y.sum().backward()
    return mod.weight, y, mod.state_dict(), [p.grad for p in mod.parameters()]


@case("register_parametrization with right_inverse returning two tensors")
def _(m):
    P = m.nn.utils.parametrize
    mod = P.register_parametrization(linear(m, 3, 2), "weight", _scale_split(m))
    y = mod(inputs(m, 2, 3))
    y.sum().backward()
    out = [mod.weight, mod.state_dict(), [p.grad for p in mod.parameters()]]
    mod.weight = m.full((2, 3), 2.0)
    out.append(mod.state_dict())
    P.remove_parametrizations(mod, "weight")
    return out + [mod.state_dict(), type(mod).__name__]


@case("remove_parametrizations(leave_parametrized=False) of two tensors")
def _(m):
    P = m.nn.utils.parametrize
    mod = P.register_parametrization(linear(m, 3, 2), "weight", _scale_split(m))
    P.remove_parametrizations(mod, "weight", leave_parametrized=False)


for _leave in (True, False):
    def _remove_case(m, leave=_leave):
        P = m.nn.utils.parametrize
        mod = P.register_parametrization(linear(m, 3, 3), "weight", _symmetric(m))
        P.register_parametrization(mod, "weight", _symmetric(m))
        P.remove_parametrizations(mod, "weight", leave_parametrized=leave)
        return (mod.state_dict(), type(mod).__name__, isinstance(mod.weight, m.nn.Parameter),
                P.is_parametrized(mod))
    CASES[f"remove_parametrizations(leave_parametrized={_leave}) after chaining"] = (
        _remove_case, 1e-6)


@case("parametrize.cached: one value per block, gradients through it")
def _(m):
    P = m.nn.utils.parametrize
    mod = P.register_parametrization(linear(m, 3, 3), "weight", _symmetric(m))
    with P.cached():
        same = mod.weight is mod.weight
        y = mod(inputs(m, 2, 3)) + mod(inputs(m, 2, 3, seed=4))
    y.sum().backward()
    return same, mod.weight is mod.weight, y, mod.parametrizations.weight.original.grad


@case("parametrize on a buffer")
def _(m):
    P = m.nn.utils.parametrize
    bn = m.nn.BatchNorm1d(3)
    P.register_parametrization(bn, "running_var", m.nn.Softplus())
    return bn.running_var, bn.state_dict(), list(dict(bn.named_buffers()))


@case("parametrize with right_inverse on a frozen parameter")
def _(m):
    P = m.nn.utils.parametrize
    lin = linear(m, 3, 3)
    lin.weight.requires_grad_(False)
    P.register_parametrization(lin, "weight", _symmetric(m))
    orig = lin.parametrizations.weight.original
    lin.weight = m.eye(3) * 2
    return (orig.requires_grad, isinstance(orig, m.nn.Parameter), lin.weight,
            [n for n, _ in lin.named_parameters()])


@case("parametrize on two tensors, removed one at a time")
def _(m):
    P = m.nn.utils.parametrize
    mod = P.register_parametrization(linear(m, 3, 3), "weight", _symmetric(m))
    P.register_parametrization(mod, "bias", m.nn.Tanh())
    out = [type(mod).__name__, mod.bias, mod.state_dict()]
    P.remove_parametrizations(mod, "weight")
    out += [type(mod).__name__, P.is_parametrized(mod), P.is_parametrized(mod, "bias")]
    P.remove_parametrizations(mod, "bias", leave_parametrized=False)
    return out + [type(mod).__name__, mod.state_dict()]


@case("parametrized module moved to float64")
def _(m):
    P = m.nn.utils.parametrize
    mod = P.register_parametrization(linear(m, 3, 3), "weight", _symmetric(m)).double()
    return mod.weight, mod(inputs(m, 2, 3).double())


@case("assigning through a parametrization without right_inverse")
def _(m):
    mod = m.nn.utils.parametrize.register_parametrization(linear(m, 3, 3), "weight",
                                                          m.nn.Tanh())
    mod.weight = m.zeros(3, 3)


@case("assigning a float64 value through right_inverse")
def _(m):
    mod = m.nn.utils.parametrize.register_parametrization(linear(m, 3, 3), "weight",
                                                          _symmetric(m))
    mod.weight = m.eye(3, dtype=m.float64)


@case("parametrize changing the shape without unsafe")
def _(m):
    class First(m.nn.Module):
        def forward(self, x):
            return x[0]
    m.nn.utils.parametrize.register_parametrization(linear(m, 3, 3), "weight", First())


@case("parametrize changing the shape with unsafe")
def _(m):
    class First(m.nn.Module):
        def forward(self, x):
            return x[0]
    mod = m.nn.utils.parametrize.register_parametrization(linear(m, 3, 3), "weight",
                                                          First(), unsafe=True)
    return mod.weight


for _leave in (True, False):
    def _unsafe_remove_case(m, leave=_leave):
        class HalfFirst(m.nn.Module):
            def forward(self, x):
                return x[0].half()
        P = m.nn.utils.parametrize
        mod = P.register_parametrization(linear(m, 3, 3), "bias", m.nn.Tanh())
        P.register_parametrization(mod, "weight", HalfFirst(), unsafe=True)
        param = mod.parametrizations.weight.original
        P.remove_parametrizations(mod, "weight", leave_parametrized=leave)
        return mod.weight, mod.weight is param, mod.state_dict(), type(mod).__name__
    CASES[f"remove_parametrizations(leave_parametrized={_leave}) of an unsafe one"] = (
        _unsafe_remove_case, 0)


@case("parametrized module deep-copied")
def _(m):
    import copy
    mod = m.nn.utils.parametrize.register_parametrization(linear(m, 3, 3), "weight",
                                                          _symmetric(m))
    twin = copy.deepcopy(mod)
    return twin.weight, type(twin).__name__, twin.state_dict()


@case("transfer_parametrizations_and_params")
def _(m):
    P = m.nn.utils.parametrize
    src = P.register_parametrization(linear(m, 3, 3), "weight", _symmetric(m))
    dst = linear(m, 3, 3, seed=9)
    P.transfer_parametrizations_and_params(src, dst)
    return dst.weight, dst.state_dict(), type(dst).__name__


@case("transfer_parametrizations_and_params: the originals share memory afterwards")
def _(m):
    P = m.nn.utils.parametrize
    src = P.register_parametrization(linear(m, 3, 3), "weight", _symmetric(m))
    dst = linear(m, 3, 3, seed=9)
    P.transfer_parametrizations_and_params(src, dst, "weight")
    with m.no_grad():
        src.parametrizations.weight.original.mul_(-1)
    return dst.weight, dst.parametrizations.weight.original


# ------------------------------------------------------------------------ prune

def _prune_case(step):
    def run(m):
        p = m.nn.utils.prune
        mod = linear(m, 6, 5)
        step(m, p, mod)
        y = mod(inputs(m, 2, 6))
        y.sum().backward()
        hooks = list(mod._forward_pre_hooks.values())
        out = [mod.weight, mod.state_dict(), dict(mod.named_buffers()),
               [(type(h).__name__, h._tensor_name,
                 [type(k).__name__ for k in getattr(h, "_pruning_methods", ())])
                for h in hooks], p.is_pruned(mod), y,
               [q.grad for q in mod.parameters()]]
        for name in ("weight", "bias"):
            if hasattr(mod, name + "_orig"):
                p.remove(mod, name)
        return out + [mod.state_dict(), p.is_pruned(mod), len(mod._forward_pre_hooks)]
    return run


_PRUNE_STEPS = {
    "l1_unstructured": lambda m, p, mod: p.l1_unstructured(mod, "weight", amount=0.4),
    "random_unstructured": lambda m, p, mod: p.random_unstructured(mod, "weight", 7),
    "ln_structured inf": lambda m, p, mod: p.ln_structured(mod, "weight", 0.5, n=INF, dim=0),
    "ln_structured -inf": lambda m, p, mod: p.ln_structured(mod, "weight", 2, n=-INF, dim=1),
    "ln_structured nuc": lambda m, p, mod: p.ln_structured(mod, "weight", 2, n=1, dim=-1),
    "random_structured": lambda m, p, mod: p.random_structured(mod, "weight", 0.5, dim=1),
    "custom_from_mask bool": lambda m, p, mod: p.custom_from_mask(
        mod, "weight", m.arange(30).reshape(5, 6) % 3 == 0),
    "amount 0": lambda m, p, mod: p.l1_unstructured(mod, "bias", amount=0),
    "amount 1.0": lambda m, p, mod: p.l1_unstructured(mod, "bias", amount=1.0),
    "l1 then random on bias": lambda m, p, mod: (
        p.l1_unstructured(mod, "weight", 0.2), p.random_unstructured(mod, "bias", 0.4),
        p.l1_unstructured(mod, "weight", 0.2)),
    "global_unstructured L1": lambda m, p, mod: p.global_unstructured(
        [(mod, "weight"), (mod, "bias")], pruning_method=p.L1Unstructured, amount=9),
    "global_unstructured with importance_scores": lambda m, p, mod: p.global_unstructured(
        [(mod, "weight"), (mod, "bias")], pruning_method=p.L1Unstructured, amount=0.3,
        importance_scores={(mod, "weight"): m.arange(30.0).reshape(5, 6).flip(0)}),
    "global_unstructured Random": lambda m, p, mod: p.global_unstructured(
        [(mod, "weight"), (mod, "bias")], pruning_method=p.RandomUnstructured, amount=0.5),
    "identity": lambda m, p, mod: p.identity(mod, "weight"),
    "custom_from_mask with a float mask": lambda m, p, mod: p.custom_from_mask(
        mod, "bias", m.tensor([1.0, 0.0, 2.0, 0.5, 1.0])),
    "ln_structured with importance_scores": lambda m, p, mod: p.ln_structured(
        mod, "weight", 2, n=2, dim=0, importance_scores=m.arange(30.0).reshape(5, 6) % 7),
    "three steps on one tensor": lambda m, p, mod: (
        p.random_unstructured(mod, "weight", 0.2), p.ln_structured(mod, "weight", 1, 1, 1),
        p.l1_unstructured(mod, "weight", 3)),
}
for _name, _step in _PRUNE_STEPS.items():
    CASES[f"prune {_name}"] = (_prune_case(_step), 1e-6)


def _tied_weights(m, mod):
    with m.no_grad():
        mod.weight.copy_((m.arange(30.0).reshape(5, 6) % 4 - 1.5).abs())
        mod.bias.copy_(m.tensor([1.0, -1.0, 0.0, 1.0, 0.0]))


for _name, _step in {
        "l1_unstructured": lambda m, p, mod: p.l1_unstructured(mod, "weight", 7),
        "l1_unstructured fraction": lambda m, p, mod: p.l1_unstructured(mod, "weight", 0.55),
        "ln_structured dim=0": lambda m, p, mod: p.ln_structured(mod, "weight", 2, 1, 0),
        "ln_structured dim=1": lambda m, p, mod: p.ln_structured(mod, "weight", 3, 2, 1),
        "global_unstructured": lambda m, p, mod: p.global_unstructured(
            [(mod, "weight"), (mod, "bias")], pruning_method=p.L1Unstructured, amount=11),
        "l1 twice": lambda m, p, mod: (p.l1_unstructured(mod, "weight", 5),
                                       p.l1_unstructured(mod, "weight", 5)),
}.items():
    CASES[f"prune ties: {_name}"] = (
        _prune_case(lambda m, p, mod, step=_step: (_tied_weights(m, mod), step(m, p, mod))),
        0)


@case("prune: a pruned weight's mask survives a state_dict round trip")
def _(m):
    p = m.nn.utils.prune
    src = p.l1_unstructured(linear(m, 4, 3), "weight", 0.5)
    dst = p.identity(m.nn.Linear(4, 3), "weight")
    dst.load_state_dict(src.state_dict())
    return dst.weight, dst(inputs(m, 2, 4))


@case("prune ln_structured on a Conv2d's input channels")
def _(m):
    p = m.nn.utils.prune
    conv = m.nn.Conv2d(4, 3, 2)
    p.ln_structured(conv, "weight", 0.5, n=1, dim=1)
    p.random_structured(conv, "weight", 1, dim=-1)
    return conv.weight, dict(conv.named_buffers()), conv(inputs(m, 1, 4, 3, 3))


@case("prune keeps the parameter object through pruning and remove")
def _(m):
    p = m.nn.utils.prune
    lin = linear(m, 4, 3)
    param = lin.weight
    p.l1_unstructured(lin, "weight", 0.5)
    kept = lin.weight_orig is param
    p.remove(lin, "weight")
    return kept, lin.weight is param, param, param.requires_grad


@case("prune a parameter that does not exist")
def _(m):
    m.nn.utils.prune.l1_unstructured(linear(m, 3, 3), "nope", 0.5)


# Cases where ember's answer differs from torch 2.13.0's, with the reason. Each must
# still differ (a fix removes its entry).
KNOWN = {
    **{f"weight_norm second derivatives dim={d}":
       "torch's fused weight-norm kernel (first and last dim) has a wrong second "
       "derivative with respect to v (its own gradgradcheck fails; its composite path, "
       "used for the other dims, agrees with ember's)" for d in (0, 2)},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name):
    check(name, *CASES[name], KNOWN)


def test_weight_norm_second_derivatives_are_exact():
    """ember's weight norm passes gradgradcheck on the dims where torch's kernel fails it
    (see KNOWN)."""
    for dim, gshape in ((0, (3, 1)), (1, (1, 4))):
        v = ember.randn(3, 4, dtype=ember.float64, requires_grad=True)
        g = ember.randn(*gshape, dtype=ember.float64, requires_grad=True)
        assert ember.autograd.gradgradcheck(
            lambda v, g, dim=dim: ember._weight_norm(v, g, dim), (v, g))



def test_known_entries_name_cases():
    assert set(KNOWN) <= set(CASES)


if __name__ == "__main__":
    report(CASES, KNOWN)
