"""The one ordered stack of modes (ember.autograd._modes): the stack itself, and every pair
of transforms and tools on it (vmap, grad, jvp/jacfwd, jacrev, hessian, the profiler)
nested both ways, against torch.func on two inputs with different batch sizes.

Every ember call runs with warnings as errors: a per-sample fallback of vmap (which warns)
fails the test, so the compositions are checked to run batched."""
import itertools
import warnings

import numpy as np
import pytest
import torch

import ember
from ember import func as efunc
from ember.autograd import _modes
from ember.autograd import forward_ad as efw

RNG = np.random.default_rng(7)
N = 3
W = RNG.standard_normal((N, N))


def strict(fn, *args):
    """``fn(*args)`` with warnings as errors (a vmap fallback warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args)


def close(a, b, atol=1e-7):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, atol)
        return
    an = a.detach().numpy() if isinstance(a, ember.Tensor) else np.asarray(a)
    bn = b.detach().numpy()
    assert an.shape == bn.shape, (an.shape, bn.shape)
    np.testing.assert_allclose(an, bn, rtol=1e-6, atol=atol)


# ----- the transforms, written once for both libraries ---------------------------------------
def base(m):
    w = m.tensor(W)
    return lambda x: m.tanh(m.matmul(w, x)) * m.sin(x).exp()


class Env:
    """One library: its tensor module, its func module, and the events of the profiles
    opened by the ``profiler`` transform."""

    def __init__(self, m, fm):
        self.m, self.fm, self.profiles = m, fm, []


def t_vmap(e, f):
    return e.fm.vmap(f)


def t_grad(e, f):
    return e.fm.grad(lambda x: f(x).sum())


def t_jvp(e, f):
    return lambda x: e.fm.jvp(f, (x,), (e.m.cos(x),))[1]


def t_jacfwd(e, f):
    return e.fm.jacfwd(f)


def t_jacrev(e, f):
    return e.fm.jacrev(f)


def t_hessian(e, f):
    return e.fm.hessian(lambda x: f(x).sum())


def t_profiler(e, f):
    def g(x):
        with e.m.profiler.profile() as p:
            out = f(x)
        e.profiles.append(p)
        return out
    return g


TRANSFORMS = {"vmap": t_vmap, "grad": t_grad, "jvp": t_jvp, "jacfwd": t_jacfwd,
              "jacrev": t_jacrev, "hessian": t_hessian, "profiler": t_profiler}
PAIRS = [(a, b) for a, b in itertools.permutations(TRANSFORMS, 2)]


def run(names, m, fm, x):
    env = Env(m, fm)
    f = base(m)
    for name in reversed(names):  # names[0] is the outermost
        f = TRANSFORMS[name](env, f)
    return f(x), env


def inputs(names, batch):
    shape = (batch,) * names.count("vmap") + (N,)
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("outer,inner", PAIRS, ids=[f"{a}({b})" for a, b in PAIRS])
def test_pair_nested_matches_torch_func(outer, inner):
    names = [outer, inner]
    for batch in (2, 4):  # a second input with another batch size
        x = inputs(names, batch)
        want, tenv = run(names, torch, torch.func, torch.tensor(x))
        got, eenv = strict(run, names, ember, efunc, ember.tensor(x))
        close(got, want, atol=1e-6)
        assert len(eenv.profiles) == len(tenv.profiles)


def _ops(prof, lib):
    """The op names a profile recorded that the base function calls (the libraries name
    their bookkeeping and the matmul variants differently)."""
    keep = {"aten::sin", "aten::exp", "aten::tanh", "aten::mul", "aten::cos"}
    return sorted(e.name for e in prof.events() if e.name in keep)


@pytest.mark.parametrize("batch", [3, 5])
def test_profiler_inside_and_around_vmap_records_the_batched_ops_once(batch):
    x = RNG.standard_normal((batch, N))
    records = {}
    for lib, m, fm in (("torch", torch, torch.func), ("ember", ember, efunc)):
        env = Env(m, fm)
        inside = fm.vmap(t_profiler(env, base(m)))
        out_in = strict(inside, m.tensor(x)) if lib == "ember" else inside(m.tensor(x))
        with m.profiler.profile(record_shapes=True) as p:
            f = fm.vmap(base(m))
            out_around = strict(f, m.tensor(x)) if lib == "ember" else f(m.tensor(x))
        records[lib] = (out_in, out_around, _ops(env.profiles[0], lib), _ops(p, lib), p)
    (t_in, t_ar, t_ops_in, t_ops_ar, _), (e_in, e_ar, e_ops_in, e_ops_ar, ep) = \
        records["torch"], records["ember"]
    close(e_in, t_in)
    close(e_ar, t_ar)
    # the same kinds of op as torch records (torch's batched matmul adds a mul of its
    # own), and each op of the function once for the whole batch, not once per sample
    for e_ops, t_ops in ((e_ops_in, t_ops_in), (e_ops_ar, t_ops_ar)):
        assert set(e_ops) == set(t_ops) == {"aten::exp", "aten::mul", "aten::sin",
                                            "aten::tanh"}
        assert e_ops == ["aten::exp", "aten::mul", "aten::sin", "aten::tanh"]
        assert all(t_ops.count(k) == 1 for k in ("aten::exp", "aten::sin", "aten::tanh"))
    sin = [ev for ev in ep.events() if ev.name == "aten::sin"]
    assert [list(s) for s in sin[0].input_shapes] == [[batch, N]]


# ----- forward AD levels as modes --------------------------------------------------------------
def test_dual_level_is_a_mode_and_leaves_the_stack_clean():
    before = list(_modes.stack)
    with efw.dual_level():
        assert isinstance(_modes.stack[-1], efw._Level)
        assert _modes.active[0] == len(_modes.stack)
        d = efw.make_dual(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 0.0]))
        close(efw.unpack_dual(d.sin()).tangent, torch.tensor([np.cos(1.0), 0.0]))
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            efw.enter_dual_level()
    assert _modes.stack == before and _modes.active[0] == len(before)


def test_jvp_of_jvp_nests_levels_as_torch_func():
    x = RNG.standard_normal(N)

    def inner(fm, m):
        return lambda x: fm.jvp(base(m), (x,), (m.ones_like(x),))[1]

    def outer(fm, m, x):
        return fm.jvp(inner(fm, m), (x,), (m.cos(x),))

    close(strict(outer, efunc, ember, ember.tensor(x)),
          outer(torch.func, torch, torch.tensor(x)))


def test_custom_function_jvp_under_vmap_and_batched_arguments_fall_back():
    class Cube(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x * x * x

        @staticmethod
        def jvp(ctx, t):
            x, = ctx.saved_tensors
            return 3 * x * x * t

    x = ember.tensor(RNG.standard_normal(N))
    basis = ember.eye(N)
    # a jvp whose tangent is batched and primal is not: the Function runs once
    got = strict(efunc.vmap(lambda t: efunc.jvp(Cube.apply, (x,), (t,))[1]), basis)
    close(got, torch.diag(3 * torch.tensor(x.numpy()) ** 2))
    # a batched argument: no batching rule for a Function, the per-sample loop is exact
    with pytest.warns(UserWarning, match="autograd.Function Cube"):
        got = efunc.vmap(Cube.apply)(ember.tensor(RNG.standard_normal((2, N))))
    assert tuple(got.shape) == (2, N)


# ----- the stack itself --------------------------------------------------------------------
class Log(_modes.Mode):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def op(self, cls, args, params):
        self.log.append((self.name, cls._op_name, len(_modes.visible())))
        return cls.apply(*args, **params)


def test_push_pop_order_and_innermost_first():
    log = []
    a, b = Log("a", log), Log("b", log)
    n0 = len(_modes.stack)
    with a, b:
        assert _modes.stack[n0:] == [a, b]
        ember.tensor([1.0]).sin()
    assert len(_modes.stack) == n0 and _modes.active[0] == n0
    # b (pushed last) sees the call first, with itself hidden; a sees it below b
    assert log == [("b", "Sin", n0 + 1), ("a", "Sin", n0)]
    with pytest.raises(ValueError):
        _modes.pop(a)


def test_a_mode_hides_itself_and_modes_pushed_inside_its_handler():
    log = []

    class Pusher(_modes.Mode):
        def op(self, cls, args, params):
            inner = Log("inner", log)
            with inner:  # entered below the hidden modes: sees the re-dispatch
                out = cls.apply(*args, **params)
            return out

    outer = Log("outer", log)
    with outer, Pusher():
        ember.tensor([1.0]).exp()
    assert [e[0] for e in log] == ["inner", "outer"]


def test_hidden_and_reentrance():
    log = []
    a = Log("a", log)

    class Reenter(_modes.Mode):
        depth = 0

        def op(self, cls, args, params):
            Reenter.depth += 1
            try:
                if Reenter.depth == 1:
                    # a mode may call ops of its own: they go to the modes below it
                    args[0].cos()
                return cls.apply(*args, **params)
            finally:
                Reenter.depth -= 1

    with a, Reenter() as r:
        ember.tensor([1.0]).sin()
        with _modes.hidden(r):
            ember.tensor([1.0]).tanh()
        with _modes.hidden(a):
            ember.tensor([1.0]).neg()
    assert [e[1] for e in log] == ["Cos", "Sin", "Tanh"]


def test_exceptions_restore_active():
    n0 = _modes.active[0]

    class Boom(_modes.Mode):
        def op(self, cls, args, params):
            raise KeyError("boom")

    b = Boom()
    with pytest.raises(KeyError):
        with b:
            ember.tensor([1.0]).sin()
    assert _modes.active[0] == n0 and b not in _modes.stack
    with b:
        with pytest.raises(KeyError):
            ember.tensor([1.0]).sin()
        assert _modes.active[0] == n0 + 1
    assert _modes.active[0] == n0


def test_beneath_runs_a_call_under_a_lower_mode_and_restores_the_order():
    log = []
    low = Log("low", log)

    class Sinker(_modes.Mode):
        sunk = False

        def op(self, cls, args, params):
            log.append(("sinker", cls._op_name, self.sunk))
            if self.sunk:
                return cls.apply(*args, **params)
            order = list(_modes.stack)
            self.sunk = True
            try:
                with _modes.beneath(self, low):
                    assert _modes.stack.index(self) == _modes.stack.index(low) - 1
                    out = cls.apply(*args, **params)
            finally:
                self.sunk = False
            assert _modes.stack == order
            return out

    with low, Sinker() as high:
        ember.tensor([1.0]).sin()
    # the sinker saw the call, then `low`, then the sinker again beneath `low`
    assert [e[:2] for e in log] == [("sinker", "Sin"), ("low", "Sin"), ("sinker", "Sin")]
    assert log[2][2] is True
    assert high not in _modes.stack and low not in _modes.stack


def test_routed_functions_and_custom_functions_consult_the_stack():
    seen = []

    class Taker(_modes.Mode):
        def call(self, fn, args, kwargs):
            seen.append(fn.__name__)
            return NotImplemented

        def function(self, cls, args, kwargs, below):
            seen.append(cls.__name__)
            return below()

    class Id(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    with Taker():
        ember.manual_seed(0)
        r = ember.rand(2)
        Id.apply(ember.tensor([1.0]))
    ember.manual_seed(0)
    assert seen == ["rand", "Id"]
    assert np.array_equal(r.numpy(), ember.rand(2).numpy())


def test_vmap_rewrites_no_module_globals():
    import ember.nn.functional as F
    from ember.autograd.function import Function
    from ember.ops import indexing, sorting

    def names():
        return (ember.rand, ember.randn, ember.rand_like, F._noise, F._check_indices,
                indexing.parse_index, indexing._convert_item, sorting._indices,
                Function.__dict__["apply"])

    before = names()
    seen = []

    def f(x):
        seen.append(names())
        return x.sin() + ember.rand(()) + x[0].sort().values.sum()

    out = strict(efunc.vmap(f, randomness="different"), ember.ones(2, 3))
    assert all(a is b for a, b in zip(seen[0], before))
    assert tuple(out.shape) == (2, 3)
    # the random draw differs per sample: the function rule ran, batched
    assert not np.allclose(out[0].numpy(), out[1].numpy())


def _mul_in_place(m):
    def f(z):
        y = z.clone()
        y.mul_(z)  # its backward reads the old values: a private copy under the modes
        return y.sin()
    return f


CASES = {
    "vmap(jvp(in-place))": lambda m, fm: lambda x, t: fm.vmap(
        lambda a, b: fm.jvp(_mul_in_place(m), (a,), (b,)))(x, t),
    "jvp(vmap(in-place))": lambda m, fm: lambda x, t: fm.jvp(
        fm.vmap(_mul_in_place(m)), (x,), (t,)),
    "vmap(grad(in-place))": lambda m, fm: lambda x, t: fm.vmap(
        fm.grad(lambda a: _mul_in_place(m)(a).sum()))(x),
    "vmap(jvp) of a shared primal": lambda m, fm: lambda x, t: fm.vmap(
        lambda b: fm.jvp(lambda a: a.exp() * a, (x[0],), (b,))[1])(t),
    "jacfwd(argnums, has_aux)": lambda m, fm: lambda x, t: fm.jacfwd(
        lambda a, b: ((a * b).sin(), a.sum()), argnums=(0, 1), has_aux=True)(x[0], t[0]),
    "jacfwd(jacfwd(jacrev))": lambda m, fm: lambda x, t: fm.jacfwd(fm.jacfwd(fm.jacrev(
        lambda a: (m.sin(a) * a.exp()).sum())))(x[0]),
}


def _flat(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _flat(item)]
    return [tree]


@pytest.mark.parametrize("name", list(CASES))
def test_more_compositions_match_torch_func(name):
    for batch in (2, 3):
        x, t = RNG.standard_normal((batch, N)), RNG.standard_normal((batch, N))
        want = CASES[name](torch, torch.func)(torch.tensor(x), torch.tensor(t))
        got = strict(CASES[name](ember, efunc), ember.tensor(x), ember.tensor(t))
        close(_flat(got), _flat(want), atol=1e-6)
