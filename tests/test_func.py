"""ember.func (torch.func's transforms) against real torch.func on the same functions and
values: grads, vjp/jvp, Jacobians and Hessians of an MLP, per-sample gradients of a CNN,
MAML with functional_call, ensembling with stack_module_state + vmap, and vmap itself."""
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from test_func_vmap import no_fallback

import ember
import ember.nn as enn
import ember.nn.functional as EF
from ember import func as efunc

RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(e, t, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(np.asarray(e.detach().numpy()), t.detach().numpy(),
                               atol=atol, rtol=rtol)


def both(a):
    return ember.tensor(a), torch.tensor(a)


def test_grad_argnums_has_aux_and_value():
    xa, ya = arr(3), arr(3)
    f = lambda T: (lambda x, y: ((x.sin() * y).sum(), x * 2))  # noqa: E731
    ex, tx = both(xa)
    ey, ty = both(ya)
    for argnums in (0, 1, (0, 1)):
        eg, eaux = efunc.grad(f(ember), argnums, has_aux=True)(ex, ey)
        tg, taux = torch.func.grad(f(torch), argnums, has_aux=True)(tx, ty)
        for e, t in zip(eg if isinstance(argnums, tuple) else [eg],
                        tg if isinstance(argnums, tuple) else [tg]):
            close(e, t)
        close(eaux, taux)
    (eg, ev) = efunc.grad_and_value(lambda x: (x ** 3).sum())(ex)
    (tg, tv) = torch.func.grad_and_value(lambda x: (x ** 3).sum())(tx)
    close(eg, tg)
    close(ev, tv)
    assert eg.grad_fn is None and not eg.requires_grad
    # second and third derivatives by nesting
    close(efunc.grad(efunc.grad(efunc.grad(lambda x: x.sin())))(ember.tensor(0.7)),
          torch.func.grad(torch.func.grad(torch.func.grad(torch.sin)))(torch.tensor(0.7)))
    with pytest.raises(RuntimeError, match="scalar"):
        efunc.grad(lambda x: x * 2)(ex)


def test_grad_wrt_dict_and_unused_input_is_zero():
    p = {"w": ember.tensor(arr(2)), "b": ember.tensor(arr(2))}
    g = efunc.grad(lambda p, x: (p["w"] * x).sum())(p, ember.ones(2))
    assert set(g) == {"w", "b"}
    close(g["w"], torch.ones(2))
    close(g["b"], torch.zeros(2))


def test_vjp_and_jvp():
    xa, va = arr(4), arr(4)
    ex, tx = both(xa)
    ev, tv = both(va)
    eo, efn = efunc.vjp(lambda x: x.tanh() * x, ex)
    to, tfn = torch.func.vjp(lambda x: x.tanh() * x, tx)
    close(eo, to)
    close(efn(ev)[0], tfn(tv)[0])
    eo, ej = efunc.jvp(lambda x, y: x.exp() * y, (ex, ev), (ev, ex))
    to, tj = torch.func.jvp(lambda x, y: x.exp() * y, (tx, tv), (tv, tx))
    close(eo, to)
    close(ej, tj)
    with pytest.raises(RuntimeError, match="same shape"):
        efunc.jvp(lambda x: x, (ex,), (ember.ones(3),))


class TMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(3, 5), torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))


class EMLP(enn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = enn.Linear(3, 5), enn.Linear(5, 2)

    def forward(self, x):
        return self.l2(ember.tanh(self.l1(x)))


def copy_weights(emod, tmod):
    sd = {k: ember.tensor(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()}
    emod.load_state_dict(sd)


def test_jacobian_and_hessian_of_mlp():
    tm, em = TMLP(), EMLP()
    copy_weights(em, tm)
    ex, tx = both(arr(3))
    for ej, tj in ((efunc.jacrev(em)(ex), torch.func.jacrev(tm)(tx)),
                   (efunc.jacfwd(em)(ex), torch.func.jacfwd(tm)(tx))):
        assert tuple(ej.shape) == tuple(tj.shape) == (2, 3)
        close(ej, tj)
    # Hessian of a scalar loss w.r.t. the input and w.r.t. two arguments
    eh = efunc.hessian(lambda x: (em(x) ** 2).sum())(ex)
    th = torch.func.hessian(lambda x: (tm(x) ** 2).sum())(tx)
    close(eh, th)
    f = lambda T: lambda x, y: (x.sin() * y ** 2).sum()  # noqa: E731
    ey, ty = both(arr(3))
    eh = efunc.hessian(f(ember), argnums=(0, 1))(ex, ey)
    th = torch.func.hessian(f(torch), argnums=(0, 1))(tx, ty)
    for i in range(2):
        for j in range(2):
            close(eh[i][j], th[i][j])
    # Jacobian w.r.t. the parameters (a dict) via functional_call
    ep = {k: v.detach() for k, v in em.named_parameters()}
    tp = {k: v.detach() for k, v in tm.named_parameters()}
    ej = efunc.jacrev(lambda p: efunc.functional_call(em, p, (ex,)))(ep)
    tj = torch.func.jacrev(lambda p: torch.func.functional_call(tm, p, (tx,)))(tp)
    for k in tp:
        close(ej[k], tj[k])


def cnn(T, nn):
    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3)
            self.fc = nn.Linear(4 * 3 * 3, 10)

        def forward(self, x):
            x = T.nn.functional.max_pool2d(T.relu(self.conv1(x)), 2)
            return self.fc(x.flatten(1))
    return CNN()


def test_per_sample_gradients_of_cnn_match_torch_vmap_grad():
    tm, em = cnn(torch, torch.nn), cnn(ember, enn)
    copy_weights(em, tm)
    xa, ya = arr(5, 1, 8, 8), RNG.integers(0, 10, 5)
    tparams = {k: v.detach() for k, v in tm.named_parameters()}
    eparams = {k: v.detach() for k, v in em.named_parameters()}

    def tloss(p, x, y):
        out = torch.func.functional_call(tm, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, y.unsqueeze(0))

    def eloss(p, x, y):
        out = efunc.functional_call(em, p, (x.unsqueeze(0),))
        return EF.cross_entropy(out, y.unsqueeze(0))

    tg = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(
        tparams, torch.tensor(xa), torch.tensor(ya))
    ex, ey = ember.tensor(xa), ember.tensor(ya)
    loop = [efunc.grad(eloss)(eparams, ex[i], ey[i]) for i in range(5)]
    eg = no_fallback(efunc.vmap(efunc.grad(eloss), in_dims=(None, 0, 0)), eparams, ex, ey)
    for k in tparams:
        close(eg[k], tg[k])
        close(ember.stack([g[k] for g in loop]), tg[k])
    # the module's own parameters are back in place
    assert em.conv1.weight is dict(em.named_parameters())["conv1.weight"]
    assert isinstance(em.conv1.weight, enn.Parameter)


def test_maml_inner_step_with_functional_call_and_grad():
    tm, em = TMLP(), EMLP()
    copy_weights(em, tm)
    xa, ya, qa = arr(6, 3), arr(6, 2), arr(6, 3)

    def outer(T, fn, model, x, y, q):
        params = dict(model.named_parameters())
        loss = lambda p, a, b: ((fn.functional_call(model, p, (a,)) - b) ** 2).mean()  # noqa
        g = fn.grad(loss)(params, x, y)
        fast = {k: params[k] - 0.1 * g[k] for k in params}
        meta = ((fn.functional_call(model, fast, (q,)) - y) ** 2).mean()
        return T.autograd.grad(meta, list(params.values()))

    eg = outer(ember, efunc, em, *map(ember.tensor, (xa, ya, qa)))
    tg = outer(torch, torch.func, tm, *map(torch.tensor, (xa, ya, qa)))
    for e, t in zip(eg, tg):
        close(e, t)


def test_functional_call_tied_weights_strict_and_buffers():
    class Tied(enn.Module):
        def __init__(self):
            super().__init__()
            self.a = enn.Linear(2, 2, bias=False)
            self.b = enn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("scale", ember.tensor(2.0))

        def forward(self, x):
            return self.b(self.a(x)) * self.scale

    m = Tied()
    w = ember.eye(2) * 3
    x = ember.ones(1, 2)
    out = efunc.functional_call(m, {"a.weight": w}, x)
    close(out, torch.full((1, 2), 18.0))
    out = efunc.functional_call(m, {"a.weight": w}, x, tie_weights=False)
    assert not ember.allclose(out, ember.full((1, 2), 18.0))
    out = efunc.functional_call(m, ({"a.weight": w}, {"scale": ember.tensor(1.0)}), (x,))
    close(out, torch.full((1, 2), 9.0))
    assert float(m.scale) == 2.0 and m.a.weight is m.b.weight
    with pytest.raises(RuntimeError, match="Missing key"):
        efunc.functional_call(m, {"a.weight": w}, x, strict=True)
    with pytest.raises(ValueError, match="multiple dictionaries"):
        efunc.functional_call(m, ({"scale": w}, {"scale": w}), x)


def test_ensembling_with_stack_module_state_and_vmap():
    tms = [TMLP() for _ in range(3)]
    ems = [EMLP() for _ in range(3)]
    for e, t in zip(ems, tms):
        copy_weights(e, t)
    ep, eb = efunc.stack_module_state(ems)
    tp, tb = torch.func.stack_module_state(tms)
    assert ep["l1.weight"].shape == tp["l1.weight"].shape and ep["l1.weight"].requires_grad
    xa = arr(4, 3)
    base = EMLP()
    tbase = TMLP()
    eo = efunc.vmap(lambda p, b, x: efunc.functional_call(base, (p, b), (x,)),
                    in_dims=(0, 0, None))(ep, eb, ember.tensor(xa))
    to = torch.func.vmap(lambda p, b, x: torch.func.functional_call(tbase, (p, b), (x,)),
                         in_dims=(0, 0, None))(tp, tb, torch.tensor(xa))
    close(eo, to)


def test_vmap_batched_path_in_dims_out_dims_and_fallback_warning():
    xa, wa, ba = arr(7, 3), arr(4, 3), arr(4)
    f = lambda T: lambda x, w, b: T.tanh(T.nn.functional.linear(x, w, b)) * 2 + 1  # noqa
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the batched path warns about nothing
        eo = efunc.vmap(f(ember), in_dims=(0, None, None))(*map(ember.tensor, (xa, wa, ba)))
    to = torch.func.vmap(f(torch), in_dims=(0, None, None))(*map(torch.tensor, (xa, wa, ba)))
    close(eo, to)
    # batch dim 1 in, out at 1
    ya = arr(3, 5)
    eo = ember.vmap(lambda x: x.exp(), in_dims=1, out_dims=1)(ember.tensor(ya))
    close(eo, torch.vmap(torch.exp, in_dims=1, out_dims=1)(torch.tensor(ya)))
    # an op without a rule: exact results through the loop, named in a warning
    with pytest.warns(UserWarning, match="MedianAll"):
        eo = efunc.vmap(lambda x: x.median() * x)(ember.tensor(ya))
    close(eo, torch.vmap(lambda x: x.median() * x)(torch.tensor(ya)))
    # reductions over a whole sample, batched
    eo = no_fallback(efunc.vmap(lambda x: x - x.mean()), ember.tensor(ya))
    close(eo, torch.vmap(lambda x: x - x.mean())(torch.tensor(ya)))
    # tuple outputs and nested vmap
    e1, e2 = no_fallback(efunc.vmap(lambda x: (x * 2, x.sum())), ember.tensor(ya))
    eo = no_fallback(efunc.vmap(efunc.vmap(lambda a: a * a)), ember.tensor(ya))
    close(e2, torch.tensor(ya).sum(1))
    close(eo, torch.tensor(ya) ** 2)
    with pytest.raises(ValueError, match="same size"):
        efunc.vmap(lambda a, b: a + b)(ember.ones(2), ember.ones(3))


def test_vmap_randomness():
    x = ember.zeros(4, 3)
    with pytest.raises(RuntimeError, match="randomness"):
        efunc.vmap(lambda a: a + ember.rand(3))(x)
    same = no_fallback(efunc.vmap(lambda a: a + ember.rand(3), randomness="same"), x)
    diff = no_fallback(efunc.vmap(lambda a: a + ember.rand(3), randomness="different"), x)
    assert ember.equal(same[0], same[3]) and not ember.equal(diff[0], diff[3])


def test_torch_func_and_torch_vmap_under_ember_run(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        from torch.func import grad, vmap
        x = torch.arange(3.0)
        print(torch.__name__, grad(lambda t: (t * t).sum())(x).tolist(),
              torch.vmap(lambda t: t * 2)(x).tolist(), vmap is torch.vmap)
    """))
    r = subprocess.run([sys.executable, "-m", "ember", "run", str(prog)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ember", "[0.0,", "2.0,", "4.0]", "[0.0,", "2.0,", "4.0]",
                                "True"]


def test_autograd_grad_is_grads_batched():
    xa = arr(3)
    ex, tx = ember.tensor(xa, requires_grad=True), torch.tensor(xa, requires_grad=True)
    eg, = ember.autograd.grad(ex.sin() * 2, ex, ember.eye(3), is_grads_batched=True)
    tg, = torch.autograd.grad(tx.sin() * 2, tx, torch.eye(3), is_grads_batched=True)
    close(eg, tg)
