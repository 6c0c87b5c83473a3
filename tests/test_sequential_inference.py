"""Sequential under no_grad with nothing watching runs its Linear layers on arrays and a
ReLU in place on the Linear's fresh product. Checked here against the module calls one
by one (bit-equal) and torch 2.13, and the plain module calls kept wherever something
watches: hooks, global hooks, the profiler, a TorchFunctionMode, overridden forwards."""
import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(3)


def _pair(m, layers, dtype="float32"):
    """The same Sequential in ember or torch, from the same weights."""
    m.manual_seed(0)
    mods = []
    for kind, *a in layers:
        if kind == "linear":
            mods.append(m.nn.Linear(*a))
        elif kind == "relu":
            mods.append(m.nn.ReLU(*a))
        else:
            mods.append(m.nn.Tanh())
    seq = m.nn.Sequential(*mods).to(getattr(m, dtype))
    rng = np.random.default_rng(1)
    with m.no_grad():
        for p in seq.parameters():
            p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)).astype(dtype)))
    return seq


MLP = [("linear", 6, 5), ("relu",), ("linear", 5, 4), ("relu",), ("linear", 4, 3)]
CASES = {
    "mlp": (MLP, (7, 6)),
    "batched_3d": (MLP, (2, 7, 6)),
    "no_bias_inplace_relu": ([("linear", 6, 5, False), ("relu", True), ("linear", 5, 3)],
                             (7, 6)),
    "ends_in_relu": ([("linear", 6, 5), ("relu",)], (7, 6)),
    "relu_first": ([("relu",), ("linear", 6, 5), ("tanh",), ("relu",)], (7, 6)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_match_the_module_calls_and_torch(case, dtype):
    layers, shape = CASES[case]
    xa = RNG.standard_normal(shape).astype(dtype)
    seq = _pair(ember, layers, dtype)
    x = ember.tensor(xa)
    with ember.no_grad():
        fast = seq(x)
        slow = x
        for mod in seq:
            slow = mod(slow)
    assert fast.dtype == slow.dtype and not fast.requires_grad and fast.grad_fn is None
    np.testing.assert_array_equal(fast.numpy(), slow.numpy())
    np.testing.assert_array_equal(x.numpy(), xa)  # the input is left alone
    tseq = _pair(torch, layers, dtype)
    with torch.no_grad():
        want = tseq(torch.tensor(xa))
    np.testing.assert_allclose(fast.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_module_hooks_see_what_torch_shows():
    """A hook on the ReLU sees the Linear's product unrectified; a hook on a Linear sees
    its output before the ReLU; all as torch."""
    xa = RNG.standard_normal((7, 6)).astype(np.float32)
    seen = []
    for m in (ember, torch):
        seq = _pair(m, MLP)
        log = []
        seq[1].register_forward_hook(lambda mod, i, o, log=log: log.append(
            (i[0].numpy().copy(), o.numpy().copy())))
        seq[2].register_forward_hook(lambda mod, i, o, log=log: log.append(
            (i[0].numpy().copy(), o.numpy().copy())))
        seq[2].register_forward_pre_hook(lambda mod, i, log=log: log.append(
            (i[0].numpy().copy(),)))
        with m.no_grad():
            out = seq(m.tensor(xa))
        seen.append((log, out.numpy()))
    (elog, eout), (tlog, tout) = seen
    assert len(elog) == len(tlog) == 3
    assert (elog[0][0] < 0).any()  # the hook saw negatives: not rectified in place
    for a, b in zip(elog, tlog):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(eout, tout, rtol=1e-5, atol=1e-5)


def test_global_hooks_see_every_module():
    xa = RNG.standard_normal((7, 6)).astype(np.float32)
    names = []
    for m in (ember, torch):
        seq = _pair(m, MLP)
        log = []
        h = m.nn.modules.module.register_module_forward_hook(
            lambda mod, i, o, log=log: log.append(type(mod).__name__))
        try:
            with m.no_grad():
                seq(m.tensor(xa))
        finally:
            h.remove()
        names.append(log)
    assert names[0] == names[1] == ["Linear", "ReLU", "Linear", "ReLU", "Linear",
                                    "Sequential"]


def test_profiler_rows_as_torch():
    """Under the profiler (a mode) each module is called: torch's product and relu rows."""
    xa = RNG.standard_normal((7, 6)).astype(np.float32)
    wanted = ("aten::relu", "aten::addmm")
    rows = []
    for m in (ember, torch):
        seq = _pair(m, MLP)
        with m.no_grad(), m.profiler.profile() as prof:
            seq(m.tensor(xa))
        names = [e.name for e in prof.events()]
        rows.append([n for n in names if n in wanted])
    assert rows[0] == rows[1]
    assert rows[0].count("aten::relu") == 2


def test_torch_function_mode_sees_the_public_calls():
    from ember.overrides import TorchFunctionMode
    log = []

    class Log(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append(func.__name__)
            return func(*args, **(kwargs or {}))

    seq = _pair(ember, MLP)
    x = ember.randn(7, 6)
    with ember.no_grad(), Log():
        seq(x)
    assert log == ["linear", "relu", "linear", "relu", "linear"]


def test_overridden_forwards_are_called():
    class Doubled(ember.nn.Linear):
        def forward(self, input):
            return super().forward(input) * 2

    seq = ember.nn.Sequential(Doubled(3, 2), ember.nn.ReLU())
    relu = ember.nn.ReLU()
    relu.forward = lambda input: input - 1  # an instance's own forward
    seq2 = ember.nn.Sequential(ember.nn.Linear(3, 2), relu)
    x = ember.randn(4, 3)
    with ember.no_grad():
        np.testing.assert_array_equal(
            seq(x).numpy(), np.maximum(ember.nn.functional.linear(
                x, seq[0].weight, seq[0].bias).numpy() * 2, 0))
        np.testing.assert_array_equal(
            seq2(x).numpy(), seq2[0](x).numpy() - 1)


@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_errors_as_torch(bad):
    errs = []
    for m in (ember, torch):
        seq = _pair(m, MLP)
        x = m.ones(7, 5) if bad == "shape" else m.ones(7, 6, dtype=m.float64)
        with m.no_grad(), pytest.raises(RuntimeError) as e:
            seq(x)
        errs.append(str(e.value))
    if bad == "dtype":
        assert errs[0] == errs[1]
    else:
        assert "7x5" in errs[0] and "6x5" in errs[0]


def test_grad_mode_keeps_the_graph():
    """With grad on, the module calls record torch's nodes as before."""
    seq = _pair(ember, MLP)
    y = seq(ember.randn(7, 6))
    assert y.grad_fn.name() == "AddmmBackward0"
    assert y.grad_fn.next_functions[1][0].name() == "ReluBackward0"


@pytest.mark.parametrize("shape", [(7, 6), (2, 3, 6)])
def test_linear_alone_under_no_grad(shape):
    """A Linear called on its own under no_grad: the graph path's values, torch's."""
    xa = RNG.standard_normal(shape).astype(np.float32)
    got = []
    for m in (ember, torch):
        lin = _pair(m, MLP)[0]
        x = m.tensor(xa)
        with m.no_grad():
            y = lin(x)
        assert not y.requires_grad and y.grad_fn is None
        got.append((y.numpy(), lin(x).detach().numpy()))
    np.testing.assert_array_equal(*got[0])
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-5, atol=1e-5)


def test_linear_whose_weight_disagrees_with_in_features_keeps_its_check():
    """A replaced weight of another width: ember's Linear checks ``in_features`` (torch's
    does not), and the short path keeps that check."""
    seq = _pair(ember, MLP)
    seq[0].weight = ember.nn.Parameter(ember.ones(5, 4))
    for grad in (False, True):
        with ember.set_grad_enabled(grad):
            with pytest.raises(RuntimeError, match="in_features=6"):
                seq(ember.ones(7, 4))
            with pytest.raises(RuntimeError, match="in_features=6"):
                seq[0](ember.ones(7, 4))
