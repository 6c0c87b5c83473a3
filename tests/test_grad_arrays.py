"""Backward formulas computed on arrays (``ember.ops._grad_arrays``) against the same
formulas in Tensor ops and against torch 2.13: bit-equal gradients to the Tensor-op path
(taken with ``create_graph``), the array path taken only when nothing could tell the
difference (no graph of the gradients, no mode, plain tensors of one floating dtype,
below the split size), and the Tensor ops otherwise."""
import numpy as np
import pytest
import torch

import ember
from ember.backend import threads as T

RNG = np.random.default_rng(0)

# name -> (function of the inputs, how many tensor inputs, input range)
CASES = {
    "sub": (lambda m, a, b: a - b, 2, (-2, 2)),
    "sub number": (lambda m, a: a - 1.5, 1, (-2, 2)),
    "mul": (lambda m, a, b: a * b, 2, (-2, 2)),
    "mul number": (lambda m, a: a * 2.5, 1, (-2, 2)),
    "mul broadcast": (lambda m, a, b: a * b[:1], 2, (-2, 2)),
    "div": (lambda m, a, b: a / b, 2, (0.5, 2)),
    "div number": (lambda m, a: a / 3.0, 1, (-2, 2)),
    "div int": (lambda m, a: a / 3, 1, (-2, 2)),
    "number div": (lambda m, a: 2.0 / a, 1, (0.5, 2)),
    "div broadcast": (lambda m, a, b: a / b[:1], 2, (0.5, 2)),
    "neg": (lambda m, a: -a, 1, (-2, 2)),
    "exp": (lambda m, a: a.exp(), 1, (-2, 2)),
    "log": (lambda m, a: a.log(), 1, (0.5, 2)),
    "sin": (lambda m, a: m.sin(a), 1, (-2, 2)),
    "cos": (lambda m, a: m.cos(a), 1, (-2, 2)),
    "tanh": (lambda m, a: m.tanh(a), 1, (-2, 2)),
    "sigmoid": (lambda m, a: m.sigmoid(a), 1, (-2, 2)),
    "chain": (lambda m, a, b: m.tanh(m.sin(a * b + a) - b).exp() / 3.0, 2, (-1, 1)),
}
# ops whose gradient is a correctly rounded product or quotient of the same operands in
# both libraries: bit-equal to torch (the others go through exp/sin/tanh... kernels)
EXACT = {"sub", "sub number", "mul", "mul number", "mul broadcast", "div", "div number",
         "div int", "div broadcast", "neg"}


def _inputs(case, dtype, shape=(3, 5)):
    _, n, (lo, hi) = CASES[case]
    return [RNG.uniform(lo, hi, shape).astype(dtype) for _ in range(n)]


def _grads(m, case, arrays, create_graph):
    f = CASES[case][0]
    xs = [m.tensor(a, requires_grad=True) for a in arrays]
    out = f(m, *xs)
    g = m.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape))
                 .astype(arrays[0].dtype))
    gs = m.autograd.grad(out, xs, g, create_graph=create_graph)
    return [x.detach().numpy() for x in gs]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case", list(CASES))
def test_array_formulas_are_bit_equal_to_the_tensor_ops_and_match_torch(case, dtype):
    arrays = _inputs(case, dtype)
    fast = _grads(ember, case, arrays, False)
    slow = _grads(ember, case, arrays, True)  # a graph of the gradients: Tensor ops
    want = _grads(torch, case, arrays, False)
    for f, s, w in zip(fast, slow, want):
        assert f.dtype == s.dtype == w.dtype
        np.testing.assert_array_equal(f, s)
        if case in EXACT and dtype != np.float16:
            np.testing.assert_array_equal(f, w)
        else:
            tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-12}[dtype]
            np.testing.assert_allclose(f.astype(np.float64), w.astype(np.float64),
                                       rtol=tol, atol=tol)


@pytest.fixture
def tensor_ops(monkeypatch):
    """Counts the Tensor-level products and quotients made while it is active."""
    calls = []
    for name in ("__mul__", "__rmul__", "__truediv__"):
        orig = getattr(ember.Tensor, name)

        def spy(self, other, _orig=orig, _name=name):
            calls.append(_name)
            return _orig(self, other)
        monkeypatch.setattr(ember.Tensor, name, spy)
    return calls


def _backward_calls(calls, out, **kw):
    del calls[:]
    out.backward(**kw)
    return list(calls)


def test_small_gradients_take_the_arrays(tensor_ops):
    a, b = (ember.tensor(x, requires_grad=True) for x in _inputs("mul", np.float32))
    out = (a * b / b).exp().sum()
    assert _backward_calls(tensor_ops, out) == []
    # with create_graph the formulas record their graph: Tensor ops
    out = (a * b / b).exp().sum()
    assert _backward_calls(tensor_ops, out, create_graph=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_large_gradients_take_the_tensor_ops_at_two_threads(tensor_ops, threads):
    """From the split size up, at more than one thread, the Tensor ops run (their
    kernels split over the threads); at one thread nothing splits: the arrays."""
    n = T.SPLIT_ELEMENTS
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        a = ember.ones(n, requires_grad=True)
        b = ember.full((n,), 2.0, requires_grad=True)
        calls = _backward_calls(tensor_ops, (a * b).sum())
    finally:
        ember.set_num_threads(before)
    assert calls == ([] if threads == 1 else ["__mul__", "__mul__"])
    np.testing.assert_array_equal(a.grad.numpy(), np.full(n, 2.0, np.float32))


def test_other_dtypes_take_the_tensor_ops(tensor_ops):
    """An operand of another dtype than the gradient (a float64 factor of a float32
    product keeps the float32 result) leaves the formula to the Tensor ops."""
    a = ember.tensor(np.ones(4, np.float32), requires_grad=True)
    b = ember.tensor(np.float64(3.0), requires_grad=True)  # a 0-d float64 tensor
    out = (a * b).sum()
    assert "__mul__" in _backward_calls(tensor_ops, out)
    ta = torch.tensor(np.ones(4, np.float32), requires_grad=True)
    tb = torch.tensor(np.float64(3.0), requires_grad=True)
    (ta * tb).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())


def test_a_subclass_with_its_own_operators_keeps_them():
    """``gy * w`` on a Tensor subclass that defines ``__rmul__`` calls it, as before."""
    seen = []

    class Logged(ember.Tensor):
        def __rmul__(self, other):
            seen.append("rmul")
            return ember.Tensor.__rmul__(self, other)

    x = ember.tensor(_inputs("neg", np.float32)[0], requires_grad=True)
    w = ember.tensor(_inputs("neg", np.float32)[0]).as_subclass(Logged)
    w.requires_grad_()
    out = (x * w).sum()
    del seen[:]
    out.backward()
    assert seen  # the gradient of x is gy * w: the subclass's operator ran
    np.testing.assert_array_equal(x.grad.numpy(), w.detach().numpy())


def test_parameters_take_the_arrays(tensor_ops):
    """``nn.Parameter`` keeps Tensor's operators: its products run on the arrays."""
    p = ember.nn.Parameter(ember.tensor(_inputs("neg", np.float32)[0]))
    x = ember.tensor(_inputs("neg", np.float32)[0], requires_grad=True)
    assert _backward_calls(tensor_ops, (x * p).sum()) == []
    np.testing.assert_array_equal(x.grad.numpy(), p.detach().numpy())


def test_profiler_rows_of_the_backward_are_torchs():
    """Under the profiler (a mode) the formulas run in Tensor ops: their rows are there."""
    counts = []
    for m in (ember, torch):
        a, b = (m.tensor(x, requires_grad=True) for x in _inputs("mul", np.float32))
        with m.profiler.profile() as prof:
            (a * b).sum().backward()
        names = [e.name for e in prof.events()]
        counts.append((names.count("aten::mul"),
                       names.count("autograd::engine::evaluate_function: MulBackward0")))
    assert counts[0] == counts[1] == (3, 1)


def test_hooks_see_the_same_gradients():
    """Tensor hooks and node hooks see plain Tensors holding the same values."""
    got = []
    arrays = _inputs("mul", np.float32)
    for m in (ember, torch):
        a, b = (m.tensor(x, requires_grad=True) for x in arrays)
        y = a * b
        seen = []
        y.register_hook(lambda g, seen=seen: seen.append(g.detach().numpy().copy()))
        y.grad_fn.register_hook(
            lambda gi, go, seen=seen: seen.extend(g.detach().numpy().copy() for g in gi))
        m.tanh(y).sum().backward()
        got.append(seen)
    for e, t in zip(*got):
        np.testing.assert_allclose(e, t, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["exp", "tanh", "mul"])
def test_saved_values_changed_in_place_still_raise(op):
    """The array path reads what the node saved only when unchanged since; an in-place
    change raises torch's error, as in the Tensor path."""
    errors = []
    for m in (ember, torch):
        x = m.tensor(_inputs("neg", np.float32)[0], requires_grad=True)
        w = m.tensor(_inputs("neg", np.float32)[0], requires_grad=True)
        if op == "exp":
            y = x.exp()
        elif op == "tanh":
            y = m.tanh(x * 1)
        else:
            y = (x * 1) * w
        if op == "mul":
            with m.no_grad():
                w.add_(1)
        else:
            y.add_(1)
        with pytest.raises(RuntimeError) as err:
            y.sum().backward()
        errors.append(str(err.value))
    assert "modified by an inplace operation" in errors[0]
    assert "modified by an inplace operation" in errors[1]


def test_second_backward_without_retain_graph_raises():
    for m in (ember, torch):
        x = m.tensor(_inputs("neg", np.float32)[0], requires_grad=True)
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()


def test_the_one_thread_flag_follows_set_num_threads():
    """``threads.MANY`` (read before any size check) follows the thread count."""
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(2)
        assert T.MANY is True
        ember.set_num_threads(1)
        assert T.MANY is False
        big = ember.ones(T.SPLIT_ELEMENTS)
        np.testing.assert_array_equal((big + big).exp().numpy(),
                                      np.full(T.SPLIT_ELEMENTS, np.exp(np.float32(2))))
    finally:
        ember.set_num_threads(before)
    assert T.MANY == (before > 1)


def test_a_subclass_with_its_own_method_keeps_it():
    """``sin``'s gradient calls ``x.cos()``: a subclass defining ``cos`` sees the call."""
    seen = []

    class Cos(ember.Tensor):
        def cos(self):
            seen.append("cos")
            return ember.Tensor.cos(self)

    x = ember.tensor(_inputs("neg", np.float32)[0]).as_subclass(Cos)
    x.requires_grad_()
    out = ember.sin(x).sum()
    del seen[:]
    out.backward()
    assert seen == ["cos"]
    np.testing.assert_array_equal(x.grad.numpy(), np.cos(x.detach().numpy()))
