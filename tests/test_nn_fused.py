"""The fused primitives behind F.linear, F.relu and F.cross_entropy (ember.ops.nn_fused)
against torch: values, gradients, second gradients, node names, special values, errors."""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check, check_raises

import ember

RED = ("none", "mean", "sum")


def F(m):
    return m.nn.functional


def logits_and_targets(n, c, ignore=None, every=3, scale=1.0):
    def make(rng):
        t = rng.integers(0, c, n).astype(np.int64)
        if ignore is not None:
            t[::every] = ignore
        return [rng.standard_normal((n, c)) * scale, t]
    return make


FUSED = [
    # linear: 2-D, N-D (folded), non-contiguous N-D (transposed), no bias, float32, empty
    Case("linear_2d", lambda m, x, w, b: F(m).linear(x, w, b), [(5, 3), (4, 3), (4,)]),
    Case("linear_2d_nobias", lambda m, x, w: F(m).linear(x, w), [(5, 3), (4, 3)]),
    Case("linear_3d", lambda m, x, w, b: F(m).linear(x, w, b), [(2, 5, 3), (4, 3), (4,)]),
    Case("linear_4d_nobias", lambda m, x, w: F(m).linear(x, w), [(2, 2, 3, 3), (4, 3)]),
    Case("linear_3d_transposed", lambda m, x, w, b: F(m).linear(x.transpose(0, 1), w, b),
         [(5, 2, 3), (4, 3), (4,)]),
    Case("linear_weight_transposed", lambda m, x, w, b: F(m).linear(x, w.t(), b),
         [(5, 3), (3, 4), (4,)]),
    Case("linear_f32", lambda m, x, w, b: F(m).linear(x, w, b), [(6, 7), (5, 7), (5,)],
         dtype=np.float32),
    Case("linear_empty_batch", lambda m, x, w, b: F(m).linear(x, w, b), [(0, 3), (4, 3), (4,)]),
    Case("linear_zero_features", lambda m, x, w, b: F(m).linear(x, w, b),
         [(5, 0), (4, 0), (4,)]),
    Case("linear_x_only", lambda m, x, w, b: F(m).linear(x, w, b), [(5, 3), (4, 3), (4,)],
         requires_grad=[1, 0, 0]),
    Case("linear_weight_only", lambda m, x, w, b: F(m).linear(x, w, b), [(5, 3), (4, 3), (4,)],
         requires_grad=[0, 1, 0]),
    Case("mlp_chain", lambda m, x, w1, b1, w2: F(m).linear(F(m).relu(F(m).linear(x, w1, b1)),
                                                          w2).tanh(),
         [(6, 3), (5, 3), (5,), (2, 5)]),
    # relu: small (plain kernel) and large (block kernel, with a tail), float32
    Case("relu_small", lambda m, x: F(m).relu(x), [(3, 4)]),
    Case("relu_block_tail", lambda m, x: F(m).relu(x), [(3, 1500)]),
    Case("relu_block_f32", lambda m, x: m.nn.ReLU()(x), [(64, 128)], dtype=np.float32),
    Case("relu_0d", lambda m, x: F(m).relu(x), [()]),
    # cross entropy: every reduction, ignored targets, ignore_index inside the classes
    *[Case(f"ce_{r}", lambda m, x, t, r=r: F(m).cross_entropy(x, t, reduction=r),
           logits_and_targets(6, 4)) for r in RED],
    *[Case(f"ce_ignored_{r}", lambda m, x, t, r=r: F(m).cross_entropy(x, t, reduction=r),
           logits_and_targets(7, 4, ignore=-100)) for r in RED],
    *[Case(f"ce_ignore_class_{r}", lambda m, x, t, r=r: F(m).cross_entropy(
        x, t, ignore_index=2, reduction=r), logits_and_targets(9, 4, ignore=2, every=2))
      for r in RED],
    Case("ce_f32_large_logits", lambda m, x, t: m.nn.CrossEntropyLoss()(x, t),
         logits_and_targets(8, 10, scale=30.0), dtype=np.float32),
    Case("ce_one_class", lambda m, x, t: F(m).cross_entropy(x, t), logits_and_targets(4, 1)),
    Case("ce_empty_sum", lambda m, x, t: F(m).cross_entropy(x, t, reduction="sum"),
         logits_and_targets(0, 3)),
    Case("ce_empty_mean", lambda m, x, t: F(m).cross_entropy(x, t),
         logits_and_targets(0, 3), grad=False),
    Case("ce_all_ignored_mean", lambda m, x, t: F(m).cross_entropy(x, t * 0 - 100),
         logits_and_targets(3, 4), gradgrad=False),
    # Sequential's Linear + ReLU pairs (one node, the ReLU in place)
    Case("seq_linear_relu", lambda m, x, w1, b1, w2, b2: seq(m, (w1, b1), (w2, b2))(x).tanh(),
         [(6, 3), (5, 3), (5,), (2, 5), (2,)]),
    Case("seq_linear_relu_3d_nobias", lambda m, x, w: seq(m, (w, None))(x).tanh(),
         [(2, 6, 3), (5, 3)]),
    Case("seq_linear_relu_transposed_input", lambda m, x, w, b: seq(m, (w, b))(
        x.transpose(0, 1)), [(6, 2, 3), (5, 3), (5,)]),
    Case("seq_linear_relu_block", lambda m, x, w, b: seq(m, (w, b))(x), [(64, 3), (80, 3), (80,)],
         dtype=np.float32),
    Case("seq_linear_relu_params_only", lambda m, x, w, b: seq(m, (w, b))(x).tanh(),
         [(6, 3), (5, 3), (5,)], requires_grad=[0, 1, 1]),
]


def seq(m, *layers):
    """Sequential(Linear, ReLU, ...) whose Linears hold the given (weight, bias) tensors."""
    mods = []
    for w, b in layers:
        lin = m.nn.Linear(w.shape[1], w.shape[0], bias=b is not None, dtype=w.dtype)
        for name, t in (("weight", w), ("bias", b)):
            if t is not None:
                delattr(lin, name)
                setattr(lin, name, t)
        mods += [lin, m.nn.ReLU()]
    return m.nn.Sequential(*mods)


@cases(FUSED)
def test_fused(case):
    check(case)


def _special_logits():
    inf, nan = float("inf"), float("nan")
    return ([[1, inf, 3], [1, inf, 3], [-inf, -inf, -inf], [0, 1, -inf], [inf, inf, 0],
             [nan, 1, 2], [1, -inf, 2]], [1, 2, 0, 2, 2, 1, 1])


@pytest.mark.parametrize("reduction", RED)
def test_cross_entropy_special_values_as_torch(reduction):
    """Rows holding +inf or only -inf give NaN, finite rows with a -inf entry stay exact."""
    x, t = _special_logits()
    out = []
    for m in (ember, torch):
        xt = m.tensor(x, requires_grad=True)
        loss = F(m).cross_entropy(xt, m.tensor(t), reduction=reduction)
        loss.sum().backward()
        out.append((loss.detach().numpy(), xt.grad.numpy()))
    (el, eg), (tl, tg) = out
    np.testing.assert_array_equal(el, tl)
    np.testing.assert_allclose(eg, tg, rtol=1e-6, equal_nan=True)


def test_node_names_as_torch():
    x = ember.randn(4, 3, requires_grad=True)
    w = ember.randn(5, 3, requires_grad=True)
    b = ember.randn(5, requires_grad=True)
    assert F(ember).linear(x, w, b).grad_fn.name() == "AddmmBackward0"
    assert F(ember).linear(x, w).grad_fn.name() == "MmBackward0"
    assert F(ember).linear(x.reshape(2, 2, 3), w, b).grad_fn.name() == "ViewBackward0"
    assert F(ember).linear(x.reshape(2, 2, 3), w).grad_fn.name() == "UnsafeViewBackward0"
    assert F(ember).relu(x).grad_fn.name() == "ReluBackward0"
    loss = F(ember).cross_entropy(x, ember.tensor([0, 1, 2, 0]))
    assert loss.grad_fn.name() == "NllLossBackward0"


def test_parameter_grads_are_fresh_arrays():
    """Gradients come straight from BLAS and reductions: owned, C-ordered, not views."""
    lin = ember.nn.Linear(3, 4)
    F(ember).cross_entropy(lin(ember.randn(5, 3)), ember.tensor([0, 1, 2, 3, 0])).backward()
    for p in (lin.weight, lin.bias):
        assert p.grad.shape == p.shape and p.grad._data.flags.c_contiguous
        assert p.grad._data.base is None


def test_retain_graph_backward_twice():
    lin = ember.nn.Linear(3, 4)
    x = ember.randn(5, 3, requires_grad=True)
    loss = F(ember).cross_entropy(F(ember).relu(lin(x)), ember.tensor([0, 1, 2, 3, 0]))
    loss.backward(retain_graph=True)
    first = [p.grad.clone() for p in (x, lin.weight, lin.bias)]
    loss.backward()
    for p, g in zip((x, lin.weight, lin.bias), first):
        np.testing.assert_allclose(p.grad.numpy(), 2 * g.numpy(), rtol=1e-6)


FUSED_ERRORS = [
    ("linear_dtype_mismatch", lambda m, x: F(m).linear(x, m.ones(4, 3, dtype=m.float32)),
     [(5, 3)]),
    ("linear_bias_dtype", lambda m, x: F(m).linear(x, m.ones(4, 3, dtype=x.dtype),
                                                   m.ones(4, dtype=m.float32)), [(5, 3)]),
    ("linear_bias_dtype_3d", lambda m, x: F(m).linear(x, m.ones(4, 3, dtype=x.dtype),
                                                      m.ones(4, dtype=m.float32)), [(2, 5, 3)]),
    ("linear_features", lambda m, x: F(m).linear(x, m.ones(4, 2, dtype=x.dtype)), [(5, 3)]),
    ("ce_target_high", lambda m, x: F(m).cross_entropy(x, m.tensor([0, 5, 1])), [(3, 5)]),
    ("ce_target_negative", lambda m, x: F(m).cross_entropy(x, m.tensor([0, -2, 1])), [(3, 5)]),
    ("ce_target_high_with_ignored", lambda m, x: F(m).cross_entropy(
        x, m.tensor([-100, 9, 1])), [(3, 5)]),
    ("ce_batch_mismatch", lambda m, x: F(m).cross_entropy(x, m.tensor([0, 1])), [(3, 5)]),
]


@pytest.mark.parametrize("name,fn,shapes", FUSED_ERRORS, ids=[e[0] for e in FUSED_ERRORS])
def test_fused_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


def test_sequential_pair_records_linear_and_relu_nodes():
    """Eager ember records what the user wrote: a Linear node, then a ReLU node."""
    net = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.ReLU())
    y = net(ember.randn(5, 3))
    assert y.grad_fn.name() == "ReluBackward0"
    assert [f.name() for f, _ in y.grad_fn.next_functions] == ["AddmmBackward0"]
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=3, out_features=4"):
        net(ember.randn(5, 2))


def test_sequential_pair_training_matches_torch():
    """Two SGD steps of Linear-ReLU-Linear-ReLU-Linear with copied weights."""
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal((16, 6)).astype(np.float32), rng.integers(0, 3, 16)
    sizes = [(6, 8), (8, 5), (5, 3)]
    params = [(rng.standard_normal((o, i)).astype(np.float32) * 0.4,
               rng.standard_normal(o).astype(np.float32) * 0.1) for i, o in sizes]
    results = []
    for m in (ember, torch):
        layers = []
        for k, (w, b) in enumerate(params):
            lin = m.nn.Linear(*w.shape[::-1])
            with m.no_grad():
                lin.weight.copy_(m.tensor(w))
                lin.bias.copy_(m.tensor(b))
            layers += [lin] + ([m.nn.ReLU()] if k < 2 else [])
        net = m.nn.Sequential(*layers)
        opt = m.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            loss = m.nn.CrossEntropyLoss()(net(m.tensor(x)), m.tensor(t))
            loss.backward()
            opt.step()
        results.append([loss.item()] + [p.detach().numpy().copy() for p in net.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relu_gradient_bits_as_torch_with_special_values(dtype):
    """relu's gradient on a large array (the block kernel): the same bits as torch's
    threshold_backward where the input is +-0, NaN or +-inf and the incoming gradient
    is NaN, +-inf or -0.0 (a NaN gradient must not leak into the zeros)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((96, 130)).astype(dtype)
    gy = rng.standard_normal((96, 130)).astype(dtype)
    specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf], dtype)
    x.reshape(-1)[::7] = np.resize(specials, x.reshape(-1)[::7].shape)
    gy.reshape(-1)[::5] = np.resize(np.array([np.nan, np.inf, -np.inf, -0.0], dtype),
                                    gy.reshape(-1)[::5].shape)
    grads = []
    for m in (ember, torch):
        xt = m.tensor(x, requires_grad=True)
        F(m).relu(xt).backward(m.tensor(gy))
        grads.append(xt.grad.numpy())
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[np.dtype(dtype).itemsize]
    np.testing.assert_array_equal(grads[0].view(bits), grads[1].view(bits))
