"""ember.func.vmap's batching rules against torch.func.vmap: the per-sample-gradients
tutorial CNN, ensembling, MAML on sine waves, per-sample Jacobians and Hessians, in_dims /
out_dims / chunk_size / nesting, randomness modes, and a table of ops from every rule
family.  Every batched call here runs with warnings as errors: a loop fallback (which
warns) fails the test, except in the test of the fallback itself."""
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as EF
from ember import func as efunc
from ember.autograd.node import Primitive
from ember.func import _vmap

RNG = np.random.default_rng(1)


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(e, t, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), atol=atol, rtol=rtol)


def close_tree(e, t, **kw):
    if isinstance(t, dict):
        assert set(e) == set(t)
        for k in t:
            close_tree(e[k], t[k], **kw)
    elif isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            close_tree(a, b, **kw)
    else:
        close(e, t, **kw)


def no_fallback(fn, *args, **kwargs):
    """``fn(*args)`` failing on a fallback to the per-sample loop (which warns once per
    op and process: the record of what has warned is emptied for the call)."""
    saved, _vmap._warned = _vmap._warned, set()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return fn(*args, **kwargs)
    finally:
        _vmap._warned = saved


def copy_weights(em, tm):
    sd = {k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
    em.load_state_dict(sd)


def tutorial_cnn(T):
    """The model of PyTorch's per-sample-gradients tutorial (MNIST-shaped input)."""
    class CNN(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = T.nn.Conv2d(1, 32, 3, 1)
            self.conv2 = T.nn.Conv2d(32, 64, 3, 1)
            self.fc1 = T.nn.Linear(9216, 128)
            self.fc2 = T.nn.Linear(128, 10)

        def forward(self, x):
            F = T.nn.functional
            x = F.relu(self.conv1(x))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = F.relu(self.fc1(T.flatten(x, 1)))
            return F.log_softmax(self.fc2(x), dim=1)
    return CNN()


def test_per_sample_gradients_tutorial_cnn_one_batched_pass():
    torch.manual_seed(0)
    tm = tutorial_cnn(torch)
    em = tutorial_cnn(ember)
    copy_weights(em, tm)
    xa, ya = arr(3, 1, 28, 28), RNG.integers(0, 10, 3)

    def loss(T, fn, model):
        def f(p, b, x, y):
            out = fn.functional_call(model, (p, b), (x.unsqueeze(0),))
            return T.nn.functional.nll_loss(out, y.unsqueeze(0))
        return f

    tp = {k: v.detach() for k, v in tm.named_parameters()}
    ep = {k: v.detach() for k, v in em.named_parameters()}
    tg = torch.func.vmap(torch.func.grad(loss(torch, torch.func, tm)),
                         in_dims=(None, None, 0, 0))(tp, {}, torch.tensor(xa), torch.tensor(ya))
    ex, ey = ember.tensor(xa), ember.tensor(ya)
    # no warning: every op of the forward (and so of the backward) has a rule
    eg = no_fallback(efunc.vmap(efunc.grad(loss(ember, efunc, em)), in_dims=(None, None, 0, 0)),
                     ep, {}, ex, ey)
    loop = [efunc.grad(loss(ember, efunc, em))(ep, {}, ex[i], ey[i]) for i in range(3)]
    for k in tp:
        assert tuple(eg[k].shape) == (3,) + tuple(tp[k].shape)
        close(eg[k], tg[k], atol=1e-6)
        close(ember.stack([g[k] for g in loop]), tg[k], atol=1e-6)


_SMALL = {}


def small_cnn(T):
    if T in _SMALL:
        return _SMALL[T]()

    class Small(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = T.nn.Conv2d(2, 4, 3, padding=1)
            self.fc = T.nn.Linear(4 * 4 * 4, 5)

        def forward(self, x):
            F = T.nn.functional
            x = F.max_pool2d(F.relu(self.conv(x)), 2)
            return F.softmax(self.fc(x.flatten(1)), -1)
    _SMALL[T] = Small
    return Small()


def test_ensembling_with_stack_module_state_and_vmap_of_cnns():
    tms = [small_cnn(torch) for _ in range(3)]
    ems = [small_cnn(ember) for _ in range(3)]
    for e, t in zip(ems, tms):
        copy_weights(e, t)
    tp, tb = torch.func.stack_module_state(tms)
    ep, eb = efunc.stack_module_state(ems)
    base_t, base_e = small_cnn(torch), small_cnn(ember)
    xa = arr(2, 2, 8, 8)
    run_t = lambda p, b, x: torch.func.functional_call(base_t, (p, b), (x,))  # noqa: E731
    run_e = lambda p, b, x: efunc.functional_call(base_e, (p, b), (x,))  # noqa: E731
    # the same minibatch for every model, then one minibatch per model
    to = torch.func.vmap(run_t, in_dims=(0, 0, None))(tp, tb, torch.tensor(xa))
    eo = no_fallback(efunc.vmap(run_e, in_dims=(0, 0, None)), ep, eb, ember.tensor(xa))
    close(eo, to)
    xs = arr(3, 2, 2, 8, 8)
    to = torch.func.vmap(run_t)(tp, tb, torch.tensor(xs))
    eo = no_fallback(efunc.vmap(run_e), ep, eb, ember.tensor(xs))
    close(eo, to)


def test_maml_on_sine_waves_vmapped_over_tasks():
    """functorch's MAML example: an inner SGD step per task with functional_call and grad,
    vmapped over tasks, differentiated by the outer loss."""
    def mlp(T):
        return T.nn.Sequential(T.nn.Linear(1, 16), T.nn.ReLU(), T.nn.Linear(16, 1))
    tm, em = mlp(torch), mlp(ember)
    copy_weights(em, tm)
    amp, phase = RNG.uniform(0.5, 2, (4, 1, 1)), RNG.uniform(0, 3, (4, 1, 1))
    xs, xq = RNG.uniform(-5, 5, (4, 5, 1)), RNG.uniform(-5, 5, (4, 5, 1))
    ys, yq = amp * np.sin(xs + phase), amp * np.sin(xq + phase)
    data = [a.astype(np.float32) for a in (xs, ys, xq, yq)]

    def meta(T, fn, model):
        params = dict(model.named_parameters())

        def task(p, x_s, y_s, x_q, y_q):
            inner = lambda q, a, b: T.nn.functional.mse_loss(  # noqa: E731
                fn.functional_call(model, q, (a,)), b)
            g = fn.grad(inner)(p, x_s, y_s)
            fast = {k: p[k] - 0.1 * g[k] for k in p}
            return T.nn.functional.mse_loss(fn.functional_call(model, fast, (x_q,)), y_q)

        losses = fn.vmap(task, in_dims=(None, 0, 0, 0, 0))(params, *map(T.tensor, data))
        return losses, T.autograd.grad(losses.sum(), list(params.values()))

    tl, tg = meta(torch, torch.func, tm)
    el, eg = no_fallback(meta, ember, efunc, em)
    close(el, tl)
    close_tree(list(eg), list(tg), atol=1e-5)


def test_jacobians_and_hessians_of_an_mlp_per_sample():
    wa, ba, va = arr(5, 3), arr(5), arr(2, 5)
    xa = arr(4, 3)

    def f(T):
        w, b, v = T.tensor(wa), T.tensor(ba), T.tensor(va)
        return lambda x: v @ T.tanh(w @ x + b)

    def g(T):
        w = T.tensor(wa)
        return lambda x: (T.tanh(w @ x) ** 2).sum()

    def g2(T):
        w = T.tensor(wa)
        return lambda x: (T.tanh(w @ x) * T.tanh(w @ x)).sum()

    tx, ex = torch.tensor(xa), ember.tensor(xa)
    close(no_fallback(efunc.vmap(efunc.jacrev(f(ember))), ex),
          torch.func.vmap(torch.func.jacrev(f(torch)))(tx))
    # forward mode inside vmap runs batched: a forward-AD level and the vmap levels
    # share one stack of modes
    e_jf = no_fallback(efunc.vmap(efunc.jacfwd(f(ember))), ex)
    close(e_jf, torch.func.vmap(torch.func.jacfwd(f(torch)))(tx))
    # ``x ** 2`` (PowScalar) has its batching rule: the hessian runs batched too
    e_h = no_fallback(efunc.vmap(efunc.hessian(g(ember))), ex)
    close(e_h,
          torch.func.vmap(torch.func.hessian(g(torch)))(tx), atol=1e-5)
    close(efunc.jacrev(efunc.jacrev(g(ember)))(ex[0]),
          torch.func.jacrev(torch.func.jacrev(g(torch)))(tx[0]), atol=1e-5)
    # grad w.r.t. a batched input, and a vmap of grad with two argnums
    h = lambda T: lambda x, w: (T.sin(x) * w).sum()  # noqa: E731
    wb = arr(4, 3)
    te = torch.func.vmap(torch.func.grad(h(torch), argnums=(0, 1)))(tx, torch.tensor(wb))
    ee = no_fallback(efunc.vmap(efunc.grad(h(ember), argnums=(0, 1))), ex, ember.tensor(wb))
    close_tree(ee, te)


def test_in_dims_out_dims_chunks_and_nesting():
    xa, ya = arr(3, 5), arr(5, 3)
    ex, ey, tx, ty = ember.tensor(xa), ember.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    cases = [
        (lambda T: lambda a, b: a * b, dict(in_dims=(0, 1))),
        (lambda T: lambda a, b: a * b, dict(in_dims=(-2, -1), out_dims=1)),
        (lambda T: lambda a, b: (a.sum(0), b + 1), dict(in_dims=(1, 0), out_dims=(0, 1))),
        (lambda T: lambda a, b: a.sum(), dict(in_dims=(0, None), chunk_size=2)),
        (lambda T: lambda a, b: T.ones(2), dict(in_dims=(0, None))),
        (lambda T: lambda a, b: (a, T.ones(2)), dict(in_dims=(0, None), out_dims=(0, None))),
        (lambda T: lambda a, b: a @ b, dict(in_dims=(0, None), out_dims=-1)),
    ]
    for f, kw in cases:
        e = no_fallback(efunc.vmap(f(ember), **kw), ex, ey)
        t = torch.func.vmap(f(torch), **kw)(tx, ty)
        close_tree(e, t)
    # pytree in_dims
    e = no_fallback(efunc.vmap(lambda d: d["a"] * d["b"], in_dims=({"a": 0, "b": None},)),
                    {"a": ex, "b": ex[0]})
    close(e, tx * tx[0])
    # nested vmap: an outer product, and a batch of batches
    outer = lambda T: T.func.vmap(T.func.vmap(T.dot, (None, 0)), (0, None))  # noqa: E731
    close(no_fallback(outer(ember), ex, ex), outer(torch)(tx, tx))
    nested = lambda T: T.func.vmap(T.func.vmap(lambda r: T.softmax(r, 0) * r.sum()))  # noqa
    za = arr(2, 3, 4)
    close(no_fallback(nested(ember), ember.tensor(za)), nested(torch)(torch.tensor(za)))
    with pytest.raises(ValueError, match="same size"):
        efunc.vmap(lambda a, b: a + b)(ember.ones(2), ember.ones(3))
    with pytest.raises(ValueError, match="only return Tensors"):
        efunc.vmap(lambda a: 3)(ember.ones(2))


def test_randomness_modes_with_dropout():
    x = ember.ones(4, 50)
    tx = torch.ones(4, 50)
    f = lambda F: lambda a: F.dropout(a, 0.5, training=True)  # noqa: E731
    with pytest.raises(RuntimeError, match="randomness"):
        torch.func.vmap(f(torch.nn.functional))(tx)
    with pytest.raises(RuntimeError, match="randomness"):
        efunc.vmap(f(EF))(x)
    with pytest.raises(RuntimeError, match="randomness"):
        efunc.vmap(lambda a: a + ember.rand(50))(x)
    same = no_fallback(efunc.vmap(f(EF), randomness="same"), x)
    diff = no_fallback(efunc.vmap(f(EF), randomness="different"), x)
    for out in (same, diff):
        assert set(np.unique(out.numpy())) <= {0.0, 2.0}
    assert all(ember.equal(same[0], same[i]) for i in range(4))
    assert not all(ember.equal(diff[0], diff[i]) for i in range(1, 4))
    r = no_fallback(efunc.vmap(lambda a: a * ember.randn_like(a), randomness="different"), x)
    assert not ember.equal(r[0], r[1])
    r = no_fallback(efunc.vmap(lambda a: a * ember.randn_like(a), randomness="same"), x)
    assert ember.equal(r[0], r[3])
    r = no_fallback(efunc.vmap(f(EF), randomness="same", chunk_size=3), x)
    assert ember.equal(r[0], r[3])
    r = no_fallback(efunc.vmap(f(EF), randomness="different", chunk_size=2), x)
    assert not ember.equal(r[0], r[2])


def test_op_without_rule_falls_back_with_one_named_warning(monkeypatch):
    from ember.func import _vmap
    monkeypatch.setattr(_vmap, "_warned", set())  # once per op and process: start afresh
    xa = arr(3, 5)
    f = lambda T: lambda x: x.median() * x  # noqa: E731
    with pytest.warns(UserWarning, match="no batching rule for _MedianAll") as rec:
        eo = efunc.vmap(f(ember))(ember.tensor(xa))
    assert len([w for w in rec if "vmap" in str(w.message)]) == 1
    close(eo, torch.func.vmap(f(torch))(torch.tensor(xa)))
    # reading a value inside vmap (data-dependent control flow) takes the loop too
    g = lambda x: x * 2 if float(x.sum()) > 0 else x  # noqa: E731
    with pytest.warns(UserWarning, match="no batching rule for Tensor.__float__"):
        eo = efunc.vmap(g)(ember.tensor(xa))
    close(eo, torch.tensor(np.stack([r * 2 if r.sum() > 0 else r for r in xa])))


def _table():
    a, b, c, d = arr(4, 3, 5), arr(4, 5, 2), arr(4, 3), arr(4, 2, 3)
    w4 = arr(4, 2, 3, 2, 2)
    idx = RNG.integers(0, 3, (4, 2))
    return [
        ("sum_mean_var", lambda T: lambda x: x.sum(1) + x.mean(-1, keepdim=True).squeeze(-1)
         + x.var(0).sum() + T.logsumexp(x, 1), (a,)),
        ("amax_argmax_norm", lambda T: lambda x: (x.amax(0), x.argmax(1), x.max(), x.norm(),
                                                  x.max(1)[0], x.argmax()), (a,)),
        ("views", lambda T: lambda x: x.reshape(5, 3).t().unsqueeze(0).expand(2, 3, 5)
         .permute(2, 0, 1).flatten().view(-1, 6), (a,)),
        ("index", lambda T: lambda x: x[1:, ::2][:, 0] + x[..., 1].sum() + x[None, 0, -1], (a,)),
        ("adv_index", lambda T: lambda x, i: (x[i], x[:, i], x[i, i], x[:, [1, 3]],
                                                 x.unsqueeze(1)[[0, 2], :, [1, 3]]),
         (a, idx)),
        ("gather_where", lambda T: lambda x, i: T.where(x > 0, x, -x).gather(0, i[:1].unsqueeze(1)
                                                        .expand(1, 5)), (a, idx)),
        ("cat_stack", lambda T: lambda x, y: (T.cat([x, y[:3].repeat(1, 2)], 1),
                                              T.stack([x[0], y[:, 0]])), (a, b)),
        ("matmul", lambda T: lambda x, y: (x @ y, y.t() @ x[0], x[0] @ x[1], T.einsum("ij,jk->ik",
                                                                                     x, y)),
         (a, b)),
        ("batched_weight", lambda T: lambda x, w: (T.nn.functional.linear(x, w),
                                                   T.matmul(w, x.t())), (c, arr(4, 6, 3))),
        ("conv_batched_weight", lambda T: lambda x, w: T.nn.functional.conv2d(x, w, padding=1),
         (arr(4, 1, 3, 5, 5), w4)),
        ("softmax_losses", lambda T: lambda x, y: (
            T.nn.functional.log_softmax(x, -1), T.nn.functional.cross_entropy(x, y),
            T.nn.functional.nll_loss(x, y, reduction="sum"),
            T.nn.functional.mse_loss(x, x.flip(0))), (d, idx)),
        ("norms_pool", lambda T: lambda x: (T.nn.functional.layer_norm(x, (5,)),
                                            T.nn.functional.avg_pool1d(x, 2),
                                            T.nn.functional.max_pool1d(x, 2)), (a,)),
        ("cumsum_flip_roll", lambda T: lambda x: (x.cumsum(1), x.flip(0), x.roll(1, 1),
                                                  T.tril(x), x.clamp(-0.5, 0.5)), (a,)),
        ("inplace", lambda T: lambda x: x.clone().mul_(2).add_(1), (a,)),
        ("scatter", lambda T: lambda x, i: (T.zeros(3, 5).scatter_add(0, i[:1, None].expand(1, 5),
                                                                     x[:1]),
                                            x.index_add(0, T.tensor([0, 2]), x[:2]),
                                            x.index_fill(1, T.tensor([1]), 0.5),
                                            x.scatter_reduce(0, i[:1, None].expand(1, 5),
                                                             x[1:2] * 2, "amax"),
                                            x.scatter_reduce(0, i[:1, None].expand(1, 5),
                                                             x[1:2], "prod",
                                                             include_self=False)), (a, idx)),
        ("linalg", lambda T: lambda x: (T.linalg.inv(x @ x.mT + T.eye(3)), T.linalg.det(x[:, :3]),
                                        T.linalg.vector_norm(x, dim=1)), (a,)),
        ("attention", lambda T: lambda q, k: T.nn.functional.scaled_dot_product_attention(
            q, k, k), (arr(4, 2, 3, 5), arr(4, 2, 6, 5))),
        ("sort_embedding", lambda T: lambda x, i: (x.sort(1)[0], x.topk(2, dim=0).indices,
                                                    T.nn.functional.embedding(i, x)),
         (a, idx)),
        ("conv_transpose", lambda T: lambda x: T.nn.functional.conv_transpose2d(
            x, T.ones(3, 2, 2, 2)), (arr(4, 1, 3, 4, 4),)),
        ("fft", lambda T: lambda x: (T.fft.fft(x).abs(), T.fft.rfft(x, dim=0).abs(),
                                     T.fft.irfft(T.fft.rfft(x))), (arr(4, 3, 6),)),
        ("interpolate", lambda T: lambda x: (
            T.nn.functional.interpolate(x, scale_factor=2, mode="linear"),
            T.nn.functional.interpolate(x, size=5, mode="nearest")), (arr(4, 2, 3, 6),)),
        ("interpolate_aa", lambda T: lambda x: T.nn.functional.interpolate(
            x, size=(3, 2), mode="bilinear", antialias=True), (arr(4, 1, 2, 6, 4),)),
        ("solve_cdist", lambda T: lambda a, b: (
            T.linalg.solve(a @ a.mT + 3 * T.eye(3), b),
            T.linalg.solve(T.ones(3, 3) + 3 * T.eye(3), b), T.cdist(a, b.mT)),
         (arr(4, 3, 3), arr(4, 3, 2))),
        ("geqrf_diag_embed", lambda T: lambda x: (T.geqrf(x)[0].abs(), T.diag_embed(x),
                                                  T.diag_embed(x, 1, 0, 2), T.diag(x[0])),
         (arr(4, 3, 3),)),
        ("unfold_fold", lambda T: lambda x: (
            T.nn.functional.unfold(x, 2),
            T.nn.functional.fold(T.nn.functional.unfold(x, 2), (3, 4), 2)),
         (arr(4, 1, 2, 3, 4),)),
        ("grad_of_prod", lambda T: lambda x: T.func.grad(lambda y: y.prod(0).sum())(x),
         (arr(4, 3, 2),)),
    ]


@pytest.mark.parametrize("name", [t[0] for t in _table()])
def test_batching_rules_match_torch_vmap(name):
    entry = next(t for t in _table() if t[0] == name)
    _, f, arrays = entry
    eargs = [ember.tensor(x) for x in arrays]
    targs = [torch.tensor(x) for x in arrays]
    e = no_fallback(efunc.vmap(f(ember)), *eargs)
    t = torch.func.vmap(f(torch))(*targs)
    close_tree(e, t, atol=1e-5)


def test_powers_run_batched_without_fallback():
    # x ** 2 lost its rule once when pow moved to its own file: every spelling of a power
    # must take the batched path (a fallback warns, and warnings are errors here)
    xa, ya = arr(4, 3), np.abs(arr(4, 3)) + 0.5
    fns = [lambda T: lambda x, y: x ** 2,
           lambda T: lambda x, y: y ** x,
           lambda T: lambda x, y: 2 ** x + 2.5 ** y,
           lambda T: lambda x, y: y ** 0.5 + x ** -1,
           lambda T: lambda x, y: T.pow(x, 3) + T.pow(y, x) + T.pow(2, x),
           lambda T: lambda x, y: T.float_power(x, 2) + T.float_power(y, x),
           lambda T: lambda x, y: T.square(x) + x.square(),
           lambda T: lambda x, y: x.clone().pow_(2) + y.clone().pow_(x),
           lambda T: lambda x, y: x ** y[0]]
    for f in fns:
        e = no_fallback(efunc.vmap(f(ember)), ember.tensor(xa), ember.tensor(ya))
        t = torch.func.vmap(f(torch))(torch.tensor(xa), torch.tensor(ya))
        assert str(e.dtype) == str(t.dtype).replace("torch", "ember")
        close(e, t)
    # batched on one side only, and per-sample grads through a power
    e = no_fallback(efunc.vmap(lambda x, y: x ** y, in_dims=(0, None)), ember.tensor(xa),
                    ember.tensor(ya[0]))
    close(e, torch.func.vmap(lambda x, y: x ** y, in_dims=(0, None))(torch.tensor(xa),
                                                                      torch.tensor(ya[0])))
    g = lambda T: T.func.vmap(T.func.grad(lambda x: (x ** 3).sum()))  # noqa: E731
    close(no_fallback(g(ember), ember.tensor(xa)), g(torch)(torch.tensor(xa)))


def test_linalg_primitives_with_rules_under_vmap():
    # eig and lu_factor check their input on the host (a per-sample loop), but their
    # primitives are batched when reached directly
    from ember.ops.linalg_eig import Eig
    from ember.ops.linalg_lu import LuFactorEx
    a = arr(4, 3, 3)
    spd = a @ a.transpose(0, 2, 1) + 3 * np.eye(3, dtype=np.float32)
    e = no_fallback(efunc.vmap(lambda x: Eig.apply(x)[0].real.sort().values),
                    ember.tensor(spd))
    close(e, torch.linalg.eigvals(torch.tensor(spd)).real.sort().values)
    e = no_fallback(efunc.vmap(LuFactorEx.apply), ember.tensor(a))
    t = torch.linalg.lu_factor_ex(torch.tensor(a))
    for x, y in zip(e, t):
        assert str(x.dtype) == str(y.dtype).replace("torch", "ember")
        close(x, y)


def _primitives():
    seen, stack = set(), [Primitive]
    while stack:
        for c in stack.pop().__subclasses__():
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def test_rule_count():
    # the report's count: primitives with a batching rule
    assert sum(c.batch is not None for c in _primitives()) >= 240


def test_vmap_of_a_transformer_layer_and_per_sample_grads_of_a_layernorm_mlp():
    def layer(T):
        T.manual_seed(0)
        return T.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    tm, em = layer(torch), layer(ember)
    copy_weights(em, tm)
    xa = arr(3, 2, 5, 8)
    close(no_fallback(efunc.vmap(em), ember.tensor(xa)), torch.func.vmap(tm)(torch.tensor(xa)))

    def mlp(T):
        return T.nn.Sequential(T.nn.Linear(6, 8), T.nn.LayerNorm(8), T.nn.GELU(),
                               T.nn.Linear(8, 3))
    tm, em = mlp(torch), mlp(ember)
    copy_weights(em, tm)
    xs, ys = arr(5, 6), RNG.integers(0, 3, 5)

    def run(T, fn, m):
        p = {k: v.detach() for k, v in m.named_parameters()}
        loss = lambda p, x, y: T.nn.functional.cross_entropy(  # noqa: E731
            fn.functional_call(m, p, (x.unsqueeze(0),)), y.unsqueeze(0))
        return fn.vmap(fn.grad(loss), in_dims=(None, 0, 0))(p, T.tensor(xs), T.tensor(ys))
    close_tree(no_fallback(run, ember, efunc, em), run(torch, torch.func, tm))


def _both(fn, *arrays, **kw):
    """``fn(T, *tensors)`` under each library: (ember's result or error, torch's)."""
    out = []
    for T in (ember, torch):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(fn(T, *[T.tensor(a) for a in arrays], **kw))
        except RuntimeError as e:
            out.append(e)
    return out


@pytest.mark.parametrize("case", [
    # a result whose length depends on each sample's values
    lambda T, x: T.func.vmap(T.nonzero)(x),
    lambda T, x: T.func.vmap(T.unique)(x),
    lambda T, x: T.func.vmap(lambda v: v[v > 0])(x),
    lambda T, x: T.func.vmap(lambda v, m: v.masked_select(m))(x, x > 0),
    # a batch written in place into a tensor without it
    lambda T, x: T.func.vmap(lambda v, b: b.add_(v), in_dims=(0, None))(x, T.zeros(4)),
    lambda T, x: T.func.vmap(lambda v, b: b.copy_(v), in_dims=(0, None))(x, T.zeros(4)),
    lambda T, x: T.func.vmap(lambda v, m, s: T.nn.functional.batch_norm(
        v.unsqueeze(0).expand(2, 4), m, s, training=True),
        in_dims=(0, None, None))(x, T.zeros(4), T.ones(4)),
    lambda T, x: T.func.vmap(lambda v, b: T.as_strided_scatter(b, v[:2], (2,), (1,)),
                             in_dims=(0, None))(x, T.zeros(4)),
    # an as_strided window outside each sample's memory
    lambda T, x: T.func.vmap(lambda v: v.as_strided((2,), (1,), 3))(x),
])
def test_vmap_refuses_what_torch_refuses(case):
    """Where PyTorch's vmap refuses on principle, so does ember's (its per-sample loop would
    answer only when the samples happen to agree, or write them all into one buffer)."""
    xa = np.array([[1, 0, 2, 0], [0, 3, 0, 4], [5, 0, 6, 0]], np.float32)
    e, t = _both(case, xa)
    assert isinstance(t, RuntimeError), t
    assert isinstance(e, RuntimeError), e
    assert "vmap" in str(e) or "Batch norm" in str(e)


def test_vmap_in_place_and_as_strided_as_torch():
    xa = arr(3, 2, 4)
    cases = [
        # in place into the batched tensor, or an unbatched value into it: fine
        lambda T, x: T.func.vmap(lambda v: v.clone().add_(T.ones(4)))(x),
        lambda T, x: T.func.vmap(lambda v, b: v.clone().mul_(b), in_dims=(0, None))(
            x, T.ones(2, 4)),
        # as_strided reads each sample's own memory, with an offset from sample 0's place
        lambda T, x: T.func.vmap(lambda v: v.as_strided((2, 2), (1, 4), 2))(x),
        lambda T, x: T.func.vmap(lambda v: v.as_strided((2, 2), (4, 1)), in_dims=1)(
            x.transpose(0, 1).contiguous()),
        lambda T, x: T.func.vmap(T.func.vmap(lambda v: v.as_strided((2,), (2,), 1)),
                                 in_dims=1)(x),
        lambda T, x: T.func.vmap(lambda v: v.as_strided((0, 2), (1, 1), 8))(x),
        # argwhere runs per sample and stacks rows of one length
        lambda T, x: T.func.vmap(T.argwhere)(x > -10),
    ]
    for case in cases:
        e, t = _both(case, xa)
        assert not isinstance(t, Exception), t
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("op", ["amax", "amin", "max", "min"])
def test_per_sample_grads_of_extrema_of_0d_samples(op):
    """A 0-d sample's only element gets the whole gradient (the ties are counted per
    sample, not over the batch), NaN included."""
    kw = {"dim": 0} if op in ("amax", "amin") else {}
    for xa in (np.array([1.5, np.nan, -0.0, 1.5], np.float32),
               np.array([[1.5, np.nan, 1.5], [2.0, 2.0, -np.inf], [np.nan, 0.0, np.nan]],
                        np.float32)):
        def f(T, x):
            return T.func.vmap(T.func.grad(lambda v: getattr(T, op)(v, **kw)))(x)
        e, t = _both(f, xa)
        np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("name", ["argmax", "argmin", "cumsum", "softmax"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_dims_of_0d_samples_flat_and_nested(name, keepdim):
    """dim 0 or -1 of a 0-d sample stays inside the sample (it once reduced the outer
    batch under nesting, or was out of range)."""
    xa = arr(2, 3)

    def f(T, x):
        op = getattr(T, name)
        outs = []
        for d in (0, -1):
            fn = (lambda v, d=d: op(v, d, keepdim)) if name.startswith("arg") else \
                (lambda v, d=d: op(v, d))
            outs += [T.func.vmap(fn)(x.reshape(-1)), T.func.vmap(T.func.vmap(fn), in_dims=1)(x)]
        return outs
    e, t = _both(f, xa)
    for a, b in zip(e, t):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
