"""A compiled module called in a Python loop (an RNN cell): values and gradients are
eager ember's to the bit and close to PyTorch's, and every guard still decides what
runs when the module, its parameters, its arguments or grad mode change between calls
(the repeated call's short check must never reuse a stale entry)."""
import numpy as np
import pytest
import torch

import ember
from ember.backend import threads


def _cell_pair(nonlinearity="tanh", bias=True, dtype=np.float32):
    """An ember RNNCell and a torch one with the same weights."""
    ember.manual_seed(0)
    e = ember.nn.RNNCell(6, 8, bias=bias, nonlinearity=nonlinearity)
    t = torch.nn.RNNCell(6, 8, bias=bias, nonlinearity=nonlinearity)
    with torch.no_grad():
        for pe, pt in zip(e.parameters(), t.parameters()):
            pt.copy_(torch.from_numpy(pe.detach().numpy().copy()))
    if dtype == np.float64:
        e.double()
        t.double()
    return e, t


def _loop(lib, run, xs, h0):
    h = h0
    for x in xs:
        h = run(x, h)
    loss = h.pow(2).mean()
    loss.backward()
    return h, loss


def _inputs(lib, dtype=np.float32, steps=5, batch=4):
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((steps, batch, 6)).astype(dtype)
    return [lib.tensor(x) for x in xs], lib.zeros(batch, 8, dtype=getattr(lib, np.dtype(
        dtype).name))


@pytest.mark.parametrize("nonlinearity,bias,dtype", [
    ("tanh", True, np.float32), ("relu", True, np.float32), ("tanh", False, np.float32),
    ("tanh", True, np.float64)])
def test_cell_loop_bits_equal_eager_and_close_to_torch(nonlinearity, bias, dtype):
    eager, tcell = _cell_pair(nonlinearity, bias, dtype)
    comp_cell, _ = _cell_pair(nonlinearity, bias, dtype)
    comp = ember.compile(comp_cell)
    for _ in range(3):  # the later calls take the repeated call's short path
        xs, h0 = _inputs(ember, dtype)
        he, le = _loop(ember, eager, xs, h0)
        hc, lc = _loop(ember, comp, xs, h0)
        assert hc.grad_fn.name() == "CompiledFunctionBackward"
        assert np.array_equal(he.detach().numpy(), hc.detach().numpy())
        assert np.array_equal(le.detach().numpy(), lc.detach().numpy())
        for pe, pc in zip(eager.parameters(), comp_cell.parameters()):
            assert np.array_equal(pe.grad.numpy(), pc.grad.numpy())
        txs, th0 = _inputs(torch, dtype)
        ht, lt = _loop(torch, tcell, txs, th0)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(hc.detach().numpy(), ht.detach().numpy(), rtol=tol,
                                   atol=tol)
        for pc, pt in zip(comp_cell.parameters(), tcell.parameters()):
            np.testing.assert_allclose(pc.grad.numpy(), pt.grad.numpy(), rtol=tol * 10,
                                       atol=tol)
    # gradients accumulated over three backwards without zero_grad: still the same bits
    assert comp._compiled.stats["captures"] <= 2


class _TwoLinear(ember.nn.Module):
    """``lin1(x) + lin2(h)``: both biases receive the same gradient."""

    def __init__(self, lib):
        super().__init__()
        self.a = lib.nn.Linear(5, 7)
        self.b = lib.nn.Linear(7, 7)

    def forward(self, x, h):
        return (self.a(x) + self.b(h)).tanh()


def test_shared_bias_gradient_is_one_sum_in_two_arrays():
    ember.manual_seed(3)
    eager = _TwoLinear(ember)
    ember.manual_seed(3)
    m = _TwoLinear(ember)
    comp = ember.compile(m)
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((3, 5)).astype(np.float32))
    h = ember.tensor(rng.standard_normal((3, 7)).astype(np.float32), requires_grad=True)
    for _ in range(2):  # the second backward accumulates into .grad
        for mod in (eager, comp):
            y = mod(x, h)
            (y * y).sum().backward()
    ga, gb = m.a.bias.grad.numpy(), m.b.bias.grad.numpy()
    assert not np.shares_memory(ga, gb)
    assert np.array_equal(ga, eager.a.bias.grad.numpy())
    assert np.array_equal(gb, eager.b.bias.grad.numpy())
    assert np.array_equal(ga, gb)
    assert np.array_equal(m.b.weight.grad.numpy(), eager.b.weight.grad.numpy())
    tx = torch.from_numpy(x.numpy())
    ta = torch.nn.Linear(5, 7)
    tb = torch.nn.Linear(7, 7)
    with torch.no_grad():
        for tp, ep in zip(list(ta.parameters()) + list(tb.parameters()),
                          list(eager.a.parameters()) + list(eager.b.parameters())):
            tp.copy_(torch.from_numpy(ep.detach().numpy().copy()))
    ty = (ta(tx) + tb(torch.from_numpy(h.detach().numpy()))).tanh()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(ga / 2, ta.bias.grad.numpy(), rtol=1e-5, atol=1e-6)


def _check_same(comp, eager, *args):
    yc, ye = comp(*args), eager(*args)
    assert np.array_equal(yc.detach().numpy(), ye.detach().numpy())
    return yc


class _Scaled(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)
        self.scale = 2.0
        self.register_buffer("shift", ember.ones(4))

    def forward(self, x):
        y = self.lin(x) * self.scale + self.shift
        return y.relu() if self.training else y


def test_guards_fire_after_repeated_calls(monkeypatch):
    # room for every guard set below (past the limit new sets run eagerly)
    from ember._compile._compiled import config
    monkeypatch.setattr(config, "cache_size_limit", 64)
    ember.manual_seed(0)
    m = _Scaled()
    comp = ember.compile(m)
    x = ember.randn(3, 4)
    for _ in range(3):
        _check_same(comp, m, x)
    n = comp._compiled.stats["captures"]
    # a plain attribute
    m.scale = 3.0
    _check_same(comp, m, x)
    _check_same(comp, m, x)
    assert comp._compiled.stats["captures"] == n + 1
    # the training flag (of a child too)
    m.eval()
    y = _check_same(comp, m, x)
    assert (y.detach().numpy() < 0).any()
    m.train()
    m.lin.training = False
    _check_same(comp, m, x)
    m.lin.training = True
    # a buffer replaced, a parameter replaced
    m.shift = ember.full((4,), -5.0)
    _check_same(comp, m, x)
    m.lin.weight = ember.nn.Parameter(ember.randn(4, 4))
    _check_same(comp, m, x)
    _check_same(comp, m, x)
    # a child module replaced
    m.lin = ember.nn.Linear(4, 4)
    _check_same(comp, m, x)
    # a new attribute that shadows nothing, then removed
    m.extra = 1
    _check_same(comp, m, x)
    del m.extra
    _check_same(comp, m, x)
    # requires_grad of a parameter: no gradient for it, the others still get theirs
    m.lin.bias.requires_grad_(False)
    comp(x).sum().backward()
    assert m.lin.bias.grad is None and m.lin.weight.grad is not None
    m.lin.bias.requires_grad_(True)
    m.lin.weight.grad = None
    comp(x).sum().backward()
    assert m.lin.bias.grad is not None and m.lin.weight.grad is not None
    # grad mode
    with ember.no_grad():
        y = comp(x)
    assert y.grad_fn is None and not y.requires_grad
    y = comp(x)
    assert y.grad_fn is not None
    # an input's requires_grad, dtype and size
    xr = x.clone().requires_grad_(True)
    comp(xr).sum().backward()
    assert xr.grad is not None
    xd = ember.randn(3, 4, dtype=ember.float64)
    m.double()
    assert comp(xd).dtype == ember.float64
    m.float()
    y = _check_same(comp, m, ember.randn(5, 4))
    assert tuple(y.shape) == (5, 4)
    assert comp._compiled.stats["eager"] == 0


def test_cell_loop_hooks_and_retain_grad():
    eager, _ = _cell_pair()
    comp_cell, _ = _cell_pair()
    comp = ember.compile(comp_cell)
    seen = {"e": [], "c": []}
    eager.bias_hh.register_hook(lambda g: seen["e"].append(g.numpy().copy()))
    comp_cell.bias_hh.register_hook(lambda g: seen["c"].append(g.numpy().copy()))
    for _ in range(2):
        xs, h0 = _inputs(ember)
        for run, k in ((eager, "e"), (comp, "c")):
            h = h0
            mid = None
            for i, x in enumerate(xs):
                h = run(x, h)
                if i == 2:
                    mid = h
                    mid.retain_grad()
            h.pow(2).mean().backward()
            seen[k + "mid"] = mid.grad.numpy().copy()
        assert np.array_equal(seen["emid"], seen["cmid"])
    assert len(seen["e"]) == len(seen["c"]) > 0
    for a, b in zip(seen["e"], seen["c"]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("m,k,n", [(19, 1, 64), (32, 127, 256), (32, 127, 512),
                                   (19, 128, 128),
                                   (32, 256, 512), (24, 200, 320), (32, 128, 64),
                                   (18, 128, 128), (33, 64, 128), (32, 257, 128),
                                   (32, 128, 100), (4, 128, 128)])
def test_weight_copy_per_run_gives_the_transposed_products_bits(m, k, n):
    """``linear_rows`` with a copy of ``w.T`` kept for one plan run gives ``gemm.addmm``'s
    bits on the transposed weight (what eager ``linear`` computes), in the range it is
    taken (at its edges) and outside it, from a fresh copy and from the kept one."""
    from ember.backend import gemm
    from ember.ops import matmul_graph
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    kept = {}
    for scale in (1.0, 1e-3, 1e3):
        x = (rng.standard_normal((m, k)) * scale).astype(np.float32)
        np.testing.assert_array_equal(matmul_graph.linear_rows(b, x, w, kept, 0),
                                      gemm.addmm(b, x, w.T))
    in_range = 19 <= m <= 32 and n % 64 == 0 and 64 <= n <= 512 and \
        (k < 128 or k <= 256 and n >= 128) and threads.copy_keeps_bits()  # (the
    # copy keeps the bits on the kernels measured so; elsewhere it is never taken)
    assert matmul_graph._copy_keeps_bits(x, w) is in_range
    # (products gemm sends elsewhere than np.matmul, MKL or ember's threads, keep theirs)
    taken = in_range and matmul_graph._direct((m, k), (k, n))
    assert (kept.get(0, False) is not False) is taken
    assert not matmul_graph._copy_keeps_bits(x.astype(np.float64), w.astype(np.float64))


def _unrolled(lib, cell, xs, steps):
    h = lib.zeros(xs.shape[1], cell.hidden_size)
    for t in range(steps):
        h = cell(xs[t], h)
    return h


def test_whole_loop_compiled_shares_each_weights_copy_and_equals_eager():
    """A loop over a cell compiled as one function: its plan's linear steps share each
    weight's row-major copy (made once per run), the values and gradients are eager
    ember's to the bit, and a weight written through ``.data`` between calls (no
    version change) reaches the next call: the copy lives for one run only."""
    rng = np.random.default_rng(6)
    xs = ember.tensor(rng.standard_normal((4, 32, 64)).astype(np.float32))
    ember.manual_seed(0)
    cell = ember.nn.RNNCell(64, 128)

    def loop(x):
        return _unrolled(ember, cell, x, 4).pow(2).sum()

    comp = ember.compile(loop)
    for i in range(3):
        if i == 2:
            cell.weight_hh.data[:5] *= 0.5
            cell.weight_ih.data.mul_(1.5)
        got = []
        for run in (loop, comp):
            cell.zero_grad()
            loss = run(xs)
            loss.backward()
            got.append([loss.detach().numpy()] + [p.grad.numpy().copy()
                                                   for p in cell.parameters()])
        for a, b in zip(*got):
            np.testing.assert_array_equal(a, b)
    e = comp._cache[-1]
    assert e.plan is not None and e.plan.kept_weights
    shared = [st for st in e.plan.steps if st.linear is not None]
    assert len(shared) == 8 and all(st.shared for st in shared)
    # against torch
    tcell = torch.nn.RNNCell(64, 128)
    with torch.no_grad():
        for pe, pt in zip(cell.parameters(), tcell.parameters()):
            pt.copy_(torch.from_numpy(pe.detach().numpy().copy()))
    tl = _unrolled(torch, tcell, torch.from_numpy(xs.numpy()), 4).pow(2).sum()
    np.testing.assert_allclose(comp(xs).item(), tl.item(), rtol=1e-5)


@pytest.mark.parametrize("shared", [False, True])
def test_linear_step_routes_give_linear_rows_bits(shared):
    """A plan's linear step runs the branch ``linear_rows`` takes for its arrays' layout,
    found once per layout (``_linear.linear_step``): the same bits as ``linear_rows`` for
    every branch (kept copy, per-run copy, transposed product, plain product, the narrow
    head's blocks, large products, a tiled bias sum, float64, strided operands), on the
    first call and the memoised ones, and a new layout of the same shapes is new."""
    from types import SimpleNamespace

    from ember._compile import _linear
    from ember.ops import matmul_graph
    rng = np.random.default_rng(9)
    cases = [(32, 64, 128), (32, 128, 128), (24, 200, 320), (8, 128, 128), (64, 128, 128),
             (128, 128, 10), (1024, 128, 256), (32, 64, 100), (2, 3, 4)]
    for m, k, n in cases:
        for dtype in (np.float32, np.float64):
            w = rng.standard_normal((n, k)).astype(dtype)
            b = rng.standard_normal(n).astype(dtype)
            layouts = [w, np.asfortranarray(w)]
            st = SimpleNamespace(routes={}, shared=shared, linear=(0, 1, 2))
            for wl in layouts:
                for xl in (rng.standard_normal((m, k)).astype(dtype),
                           rng.standard_normal((k, m)).astype(dtype).T):
                    kept, kept2 = {}, {}
                    for _ in range(2):
                        got = _linear.linear_step(st, b, xl, wl, kept if shared else None)
                        want = matmul_graph.linear_rows(b, xl, wl,
                                                        kept2 if shared else None, 1)
                        np.testing.assert_array_equal(got, want)
            assert len(st.routes) == 4  # two weight layouts times two input layouts


@pytest.mark.parametrize("threads", [1, 2])
def test_linear_vjp_products_give_gemms_bits(threads):
    """A plan's linear backward runs its products on ``np.matmul`` directly where
    ``gemm.matmul`` would (``_linear.vjp_products``, found once per layout): the same
    bits as ``linear_vjp`` through ``gemm.matmul`` on the first and memoised calls, for
    every edge subset and operand layout; products ``gemm`` runs its own way (MKL-sized,
    on ember's threads, a transposed operand ``_numpy_matmul`` takes apart) are left to
    it, and a recurrent cell's products at one thread are taken."""
    from ember._compile import _linear
    from ember.backend import gemm
    from ember.ops import nn_fused
    rng = np.random.default_rng(4)
    cases = [(32, 64, 128), (32, 128, 128), (4, 6, 8), (1, 5, 3), (64, 128, 128),
             (1024, 128, 256), (256, 12, 128), (3, 300, 2)]
    saved = ember.get_num_threads()
    ember.set_num_threads(threads)
    taken = set()
    try:
        for m, k, n in cases:
            for dtype in (np.float32, np.float64):
                g = rng.standard_normal((m, n)).astype(dtype)
                for wl, w in (("C", rng.standard_normal((n, k)).astype(dtype)),
                              ("F", np.asfortranarray(rng.standard_normal((n, k)))
                               .astype(dtype, order="F"))):
                    for xl, x in (("C", rng.standard_normal((m, k)).astype(dtype)),
                                  ("F", np.asfortranarray(rng.standard_normal((m, k)))
                                   .astype(dtype, order="F")),
                                  ("S", rng.standard_normal((m, 2 * k)).astype(dtype)[:, ::2])):
                        routes = {}
                        for edges in [(1, 1, 1), (None, 1, 1), (1, None, None), (1, 1)]:
                            want = nn_fused.linear_vjp(edges, g, x, w, None, gemm.matmul,
                                                       gemm.matmul)
                            for _ in range(2):
                                got = _linear.vjp_products(routes, edges, g, x, w)
                                if got is None:
                                    continue
                                taken.add((m, k, n, wl, xl))
                                for a, b in zip(got, want):
                                    assert (a is None) == (b is None)
                                    if a is not None:
                                        np.testing.assert_array_equal(a, b)
                        assert len(routes) == 1
    finally:
        ember.set_num_threads(saved)
    if threads == 1:
        for shape in [(32, 64, 128), (32, 128, 128), (4, 6, 8), (64, 128, 128)]:
            assert shape + ("C", "C") in taken and shape + ("C", "S") in taken
    else:  # ember's threads may take these
        assert (32, 128, 128, "C", "C") not in taken and (4, 6, 8, "C", "C") in taken
    # the input's gradient on a column-major weight: ``gemm._by_transpose``'s own way
    assert (32, 64, 128, "F", "C") not in taken
    assert not any(t[:3] == (1024, 128, 256) for t in taken)  # MKL-sized products


def test_compiled_cell_gradients_as_arrays_equal_the_tensor_path(monkeypatch):
    """The plan's node hands its leaves' gradients to the engine as arrays
    (``CompiledFunctionBackward._array_grads``): the same bits as through its
    ``backward`` on Tensors, each parameter's ``.grad`` its own memory; where two leaves
    get one array (``a + b``), or the caller's gradient is passed on, each leaf's
    ``.grad`` is still its own memory (both paths)."""
    from ember._compile import _plan
    grads = []
    for array_path in (True, False):
        if not array_path:
            monkeypatch.setattr(_plan.CompiledFunctionBackward, "_array_grads", None)
        cell, _ = _cell_pair()
        comp = ember.compile(cell)
        xs, h0 = _inputs(ember, steps=6, batch=5)
        h0.requires_grad_(True)
        for _ in range(3):
            _loop(ember, comp, xs, h0)
        grads.append([p.grad.numpy().copy() for p in cell.parameters()] +
                     [h0.grad.numpy().copy()])
        ps = [p.grad.numpy() for p in cell.parameters()]
        for i, a in enumerate(ps):
            assert all(not np.shares_memory(a, b) for b in ps[i + 1:])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    add = ember.compile(lambda a, b: a + b)
    for _ in range(3):
        a = ember.tensor(np.ones(3, np.float32), requires_grad=True)
        b = ember.tensor(np.ones(3, np.float32), requires_grad=True)
        (add(a, b) * 2).sum().backward()
        assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
        np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 2, np.float32))
        np.testing.assert_array_equal(b.grad.numpy(), np.full(3, 2, np.float32))
        a.grad = b.grad = None
        g = ember.full((3,), 3.0)
        add(a, b).backward(g)  # the caller's gradient, passed on to both leaves
        for t in (a, b):
            assert not np.shares_memory(t.grad.numpy(), g.numpy())
            np.testing.assert_array_equal(t.grad.numpy(), np.full(3, 3, np.float32))
        assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())


class _SumReadTwice(ember.nn.Module):
    """``tanh(lin2(h) + lin1(x)) * lin1(x)``: the sum's second operand read again."""

    def __init__(self):
        super().__init__()
        self.a = ember.nn.Linear(5, 7)
        self.b = ember.nn.Linear(7, 7)

    def forward(self, x, h):
        y = self.a(x)
        return (self.b(h) + y).tanh() * y


def test_sum_releases_an_operand_only_the_sum_reads():
    """A compiled cell's call holds no array of its input product until the backward
    (the sum alone reads it, as eager ember drops it after the sum); where another step
    reads it too it is kept. Values and gradients stay eager's to the bit."""
    from ember._compile import _plan
    rng = np.random.default_rng(5)
    x = ember.tensor(rng.standard_normal((3, 5)).astype(np.float32))
    for make, released in ((lambda: _TwoLinear(ember), True), (_SumReadTwice, False)):
        ember.manual_seed(6)
        eager = make()
        ember.manual_seed(6)
        mod = make()
        comp = ember.compile(mod)
        for i in range(4):  # the first call captures the graph
            h = ember.tensor(rng.standard_normal((3, 7)).astype(np.float32),
                             requires_grad=True)
            he = h.detach().requires_grad_(True)
            yc, ye = comp(x, h), eager(x, he)
            assert np.array_equal(yc.detach().numpy(), ye.detach().numpy())
            node = yc.grad_fn
            if i:
                assert type(node) is _plan.CompiledFunctionBackward
                add = [st for st in node.plan.steps if st.add_into is not None]
                assert len(add) == 1 and add[0].add_into[3] is released
                env, _ = node._saved
                assert (env[add[0].add_into[1]] is None) is released
            (yc * yc).sum().backward()
            (ye * ye).sum().backward()
            assert np.array_equal(h.grad.numpy(), he.grad.numpy())
        for pc, pe in zip(mod.parameters(), eager.parameters()):
            assert np.array_equal(pc.grad.numpy(), pe.grad.numpy())
