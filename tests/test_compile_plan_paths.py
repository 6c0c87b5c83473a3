"""Compiled plans' cheaper paths give eager ember's values to the bit (and torch's to
rounding): calls recorded above the primitives run as one NumPy call on the array
(``x[0]``, ``view``, ``reshape``, ``size`` and size arithmetic), training steps whose
temporaries are all small run on the heap without the arena, and the fused gradient
loops called directly on small arrays."""
import copy

import numpy as np
import pytest
import torch

import ember


def _sliced_net(m):
    """A module reading its input through the calls a capture records as calls."""
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(12, 8)
            self.b = nn.Linear(8, 3)

        def forward(self, x):                    # x: (4, 5, 6, 2)
            first = x[0]                         # getitem with an int: (5, 6, 2)
            last = x[:, -1]                      # a slice and an int: (4, 6, 2)
            h = last.reshape(x.size(0), -1)      # size, reshape: (4, 12)
            t = x.transpose(1, 2).reshape(x.size(0) * 6, -1)   # a copying reshape
            v = first.view(first.size(0), 12)    # view with a size read from the input
            return self.b(self.a(h).tanh()).sum() + self.a(v).pow(2).mean() + \
                t.mean() * 0.5
    return Net()


def _train(m, net, x, compiled, steps=4, head=None):
    opt = m.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = net(x) if head is None else head(net(x))
        loss.backward()
        opt.step()
        return loss
    run = m.compile(step) if compiled else step
    losses = [run(x).item() for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in net.parameters()], run


def test_direct_array_calls_equal_eager_bitwise_and_torch():
    ember.manual_seed(0)
    net = _sliced_net(ember)
    ref = copy.deepcopy(net)
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in
             net.state_dict().items()}
    xa = np.random.default_rng(0).standard_normal((4, 5, 6, 2)).astype(np.float32)
    x = ember.tensor(xa)
    got, params, run = _train(ember, net, x, True)
    want, ref_params, _ = _train(ember, ref, x, False)
    assert run.stats == {"captures": 1, "replays": 3, "eager": 0}
    plan = run._cache[0].plan
    direct = sorted({st.node.op for st in plan.steps if st.fast is not None})
    assert direct == ["getitem", "int.mul", "reshape", "size", "view"]
    assert got == want
    for p, q in zip(params, ref_params):
        np.testing.assert_array_equal(p, q)
    tnet = _sliced_net(torch)                    # torch, from the same weights
    tnet.load_state_dict(state)
    t_losses, t_params, _ = _train(torch, tnet, torch.from_numpy(xa), False)
    np.testing.assert_allclose(got, t_losses, rtol=1e-5)
    for p, q in zip(params, t_params):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-6)


def test_direct_view_leaves_nothing_a_copy_can_break():
    """A view the plan makes with NumPy is a view (the gradient reaches the input), and a
    view NumPy cannot make falls back to ember's own (which raises as eagerly)."""
    def f(x):
        return (x.view(x.size(0), -1) * 2).sum()

    cf = ember.compile(f)
    x = ember.randn(3, 4, 2, requires_grad=True)
    for _ in range(3):
        x.grad = None
        y = cf(x)
        y.backward()
    assert cf.stats["replays"] == 2
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4, 2), 2, np.float32))
    tx = torch.from_numpy(x.detach().numpy()).requires_grad_()
    (tx.view(tx.size(0), -1) * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())

    def g(x):
        return x.transpose(0, 1).view(-1).sum()
    with pytest.raises(RuntimeError, match="view"):
        g(ember.randn(3, 4))
    with pytest.raises(RuntimeError, match="view"):
        torch.randn(3, 4).transpose(0, 1).view(-1)


def _cell_loop(m):
    nn = m.nn

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.RNNCell(6, 10)

        def forward(self, xs):
            h = m.zeros(xs.shape[1], 10)
            for t in range(xs.shape[0]):
                h = self.cell(xs[t], h)
            return h.pow(2).mean()
    return Loop()


@pytest.mark.parametrize("batch,large", [(3, False), (4096, True)])
def test_small_training_step_runs_on_the_heap(batch, large):
    """Where every temporary is small the compiled step runs without the arena (its
    bookkeeping and compiled loops cost more than they save), with the same values."""
    ember.manual_seed(0)
    net = _cell_loop(ember)
    ref = copy.deepcopy(net)
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in
             net.state_dict().items()}
    xa = np.random.default_rng(1).standard_normal((5, batch, 6)).astype(np.float32)
    got, params, run = _train(ember, net, ember.tensor(xa), True)
    want, ref_params, _ = _train(ember, ref, ember.tensor(xa), False)
    plan = run._cache[0].plan
    assert list(plan.train_large.values()) == [large]
    assert got == want
    for p, q in zip(params, ref_params):
        np.testing.assert_array_equal(p, q)
    tnet = _cell_loop(torch)
    tnet.load_state_dict(state)
    t_losses, t_params, _ = _train(torch, tnet, torch.from_numpy(xa), False)
    np.testing.assert_allclose(got, t_losses, rtol=1e-5)
    for p, q in zip(params, t_params):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shape,threads", [((3, 5), 1), ((32, 128), 1), ((600, 1000), 2)])
def test_fused_gradient_loop_equals_numpy_bitwise(shape, threads):
    """tanh's fused gradient loop, called directly on small arrays and split over two
    threads on large ones: NumPy's ``(1 - y * y) * g`` to the bit, torch's to rounding."""
    from ember._compile import _fused
    from ember.ops import unary
    loop = _fused.grad_loop(unary.tanh.primitive)
    assert loop is not None                    # numba is a test dependency
    rng = np.random.default_rng(2)
    y = np.tanh(rng.standard_normal(shape)).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    g.flat[:2] = [-0.0, np.nan]
    out = np.empty_like(g)
    saved = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        assert loop(g, y, out)
    finally:
        ember.set_num_threads(saved)
    np.testing.assert_array_equal(out, (1 - y * y) * g)
    assert np.signbit(out).tolist() == np.signbit((1 - y * y) * g).tolist()
    want = torch.ops.aten.tanh_backward(torch.from_numpy(g), torch.from_numpy(y)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)
    # arrays a flat loop does not cover: nothing written, the caller runs NumPy
    assert not loop(g[:, ::2], y[:, ::2], out[:, ::2])
    assert not loop(g.astype(np.float64), y, out)


def _split_loss(m, p, c, uses):
    """``p`` split into rows by int index (as a projection into q, k, v), a loss over the
    rows ``uses`` names: each row's gradient is ``c``'s row (with -0.0 and NaN in it)."""
    rows = {i: p[i] for i in uses}
    return sum((rows[i] * c[i]).sum() for i in uses)


@pytest.mark.parametrize("uses,shape", [((0, 1, 2), (3, 4, 5)), ((2, 0), (3, 4, 5)),
                                        ((-1, -3, -2), (3, 4, 5)), ((1,), (3, 4, 5)),
                                        ((0, 1, 2), (3, 128, 128))])
def test_split_rows_gradient_written_into_one_array_equals_eager_bitwise(uses, shape):
    """``p[0]``, ``p[1]``, ``p[2]``: their gradients go into one array for ``p`` (no
    zero-filled array per row and no full-size sums), -0.0 and NaN as eager sums them."""
    rng = np.random.default_rng(3)
    ca = rng.standard_normal(shape).astype(np.float32)
    ca[:, 0, :3] = [-0.0, np.nan, 0.0]
    c = ember.tensor(ca)
    pa = rng.standard_normal(shape).astype(np.float32)

    def step(p):
        loss = _split_loss(ember, p, c, uses)
        loss.backward()
        return loss

    grads = []
    for f in (ember.compile(step), step):
        p = ember.tensor(pa, requires_grad=True)
        for _ in range(3):
            p.grad = None
            f(p)
        grads.append(p.grad.numpy())
        if f is not step:
            marked = [st.node.op for st in f._cache[0].plan.steps if st.scatter]
            assert marked == (["getitem"] * len(uses) if len(uses) > 1 else [])
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.signbit(grads[0]).tolist() == np.signbit(grads[1]).tolist()
    tp = torch.tensor(pa, requires_grad=True)
    _split_loss(torch, tp, torch.from_numpy(ca), uses).backward()
    np.testing.assert_array_equal(grads[0], tp.grad.numpy())


def test_compiled_conv_step_reuses_forward_columns(monkeypatch):
    """A compiled training step's convolution keeps its forward's columns for the
    weight's gradient, as eagerly (none rebuilt in the backward); the same values."""
    from ember.ops import conv
    seen = []
    inner = conv._weight_arrays

    def spy(x, gy, g, cols=None):
        seen.append(cols is not None)
        return inner(x, gy, g, cols)
    monkeypatch.setattr(conv, "_weight_arrays", spy)

    def make(m):
        m.manual_seed(0)
        return m.nn.Sequential(m.nn.Conv2d(2, 4, 3, padding=1), m.nn.ReLU(),
                               m.nn.Conv2d(4, 3, 3), m.nn.Flatten())
    net = make(ember)
    ref = copy.deepcopy(net)
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in
             net.state_dict().items()}
    xa = np.random.default_rng(4).standard_normal((5, 2, 8, 8)).astype(np.float32)

    def head(y):
        return y.pow(2).mean()
    got, params, run = _train(ember, net, ember.tensor(xa), True, head=head)
    assert run.stats == {"captures": 1, "replays": 3, "eager": 0}
    assert seen[-2:] == [True, True]       # the last replay's two weight gradients
    want, ref_params, _ = _train(ember, ref, ember.tensor(xa), False, head=head)
    assert got == want
    for p, q in zip(params, ref_params):
        np.testing.assert_array_equal(p, q)
    tnet = make(torch)
    tnet.load_state_dict(state)
    t_losses, t_params, _ = _train(torch, tnet, torch.from_numpy(xa), False, head=head)
    np.testing.assert_allclose(got, t_losses, rtol=1e-5)
    for p, q in zip(params, t_params):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dim,extra", [(1, False), (-1, False), (0, True)])
def test_stack_of_unbound_pieces_is_one_copy(dim, extra):
    """``stack(x.unbind(d), d)`` runs as one copy of ``x`` (its gradient passed through,
    C-ordered) where nothing else reads the pieces; with a piece read elsewhere it
    stays as written. Eager's values to the bit, torch's gradients."""
    rng = np.random.default_rng(5)
    xa = rng.standard_normal((3, 4, 5)).astype(np.float32)
    ca = rng.standard_normal((5, 4, 3)).astype(np.float32)

    def loss_of(m, x, c):
        pieces = (x * 2).unbind(dim)
        y = m.stack(pieces, dim).transpose(0, 2)     # a non-contiguous gradient comes back
        loss = (y * c).sum()
        return loss + pieces[1].sum() if extra else loss

    def step(x, c):
        loss = loss_of(ember, x, c)
        loss.backward()
        return loss

    got = []
    for f in (ember.compile(step), step):
        x = ember.tensor(xa, requires_grad=True)
        for _ in range(3):
            x.grad = None
            loss = f(x, ember.tensor(ca))
        got.append((loss.item(), x.grad.numpy()))
        if f is not step:
            joined = [st.node.op for st in f._cache[0].plan.steps if st.joined]
            assert joined == ([] if extra else ["Stack"])
            assert ("Unbind" in [st.node.op for st in f._cache[0].plan.steps]) == extra
    assert got[0][0] == got[1][0]
    np.testing.assert_array_equal(got[0][1], got[1][1])
    assert got[0][1].flags.c_contiguous
    tx = torch.tensor(xa, requires_grad=True)
    tl = loss_of(torch, tx, torch.from_numpy(ca))
    tl.backward()
    np.testing.assert_allclose(got[0][0], tl.item(), rtol=1e-5)
    np.testing.assert_array_equal(got[0][1], tx.grad.numpy())


@pytest.mark.parametrize("uses,through", [((0, 1, 2), False), ((2, 0), False),
                                          ((-1, -3), False), ((0, 2), True),
                                          ((-3, -1), True), ((2, 1, 0), True)])
def test_split_rows_arena_buffer_zeroed_only_where_unwritten(monkeypatch, uses, through):
    """With the arena, the rows' gradient array is not zero-filled before the rows are
    written: rows no ``x[i]`` wrote are zeroed where the array is read (a leaf's
    gradient, or its producer's backward when ``through``), none when every row is
    written. The buffer is filled with NaN between calls, so a row left unzeroed shows;
    the values equal eager's to the bit."""
    from ember._compile import _rewrites
    zeroed = []
    inner = _rewrites._zero_unwritten

    def spy(buf, rows):
        zeroed.append(buf.shape[0] - len(rows))
        return inner(buf, rows)
    monkeypatch.setattr(_rewrites, "_zero_unwritten", spy)
    shape = (3, 128, 128)
    rng = np.random.default_rng(4)
    ca = rng.standard_normal(shape).astype(np.float32)
    ca[:, 0, :3] = [-0.0, np.nan, 0.0]
    c = ember.tensor(ca)
    pa = rng.standard_normal(shape).astype(np.float32)

    def step(p):
        loss = _split_loss(ember, p * 2.0 if through else p, c, uses)
        loss.backward()
        return loss

    grads = []
    compiled = ember.compile(step)
    for f in (compiled, step):
        p = ember.tensor(pa, requires_grad=True)
        for _ in range(6):
            p.grad = None
            f(p)
            plan = f._cache[0].plan if f is compiled else None
            if plan is not None:  # (the plan runs from a later call)
                for key, block in plan.arena.blocks.items():
                    if type(key) is tuple and key[0] == "scatter":
                        block.view(np.float32)[...] = np.nan
        grads.append(p.grad.numpy().copy())
    # (a leaf's gradient taken from the arena turns the arena off for later calls)
    assert len(zeroed) >= (4 if through else 1) and zeroed == [3 - len(uses)] * len(zeroed)
    np.testing.assert_array_equal(grads[0], grads[1])
    if not through:  # (through a product, one -0.0 of eager's reads 0.0, as before this path)
        assert np.signbit(grads[0]).tolist() == np.signbit(grads[1]).tolist()


@pytest.mark.parametrize("uses,viewed,shape", [
    ((0, 1, 2), (0, 1, 2), (3, 128, 128)),   # arena: q, k, v heads split by a view
    ((0, 1, 2), (0, 2), (3, 128, 128)),      # a row read as it is beside viewed ones
    ((2, 0), (2, 0), (3, 4, 6)),             # no arena; a row never read
    ((1,), (1,), (3, 128, 128)),             # a lone row: kept as it is (-0.0 stays)
    ((-1, -3), (-3,), (3, 4, 6))])
def test_split_rows_viewed_gradient_written_through_the_view_equals_eager_bitwise(
        monkeypatch, uses, viewed, shape):
    """``p[i].view(...)`` read transposed (a head split): the view's gradient, not laid
    out in rows, is written into ``p``'s rows' array through the row seen in the view's
    shape, without the view's own backward copying it first; -0.0 and NaN as eager's."""
    from ember._compile import _rewrites
    through_view = []
    inner = _rewrites._scatter

    def spy(G, st, args, g, arena, firsts, unfilled, shaped=False):
        done = inner(G, st, args, g, arena, firsts, unfilled, shaped)
        if shaped:
            through_view.append(done)
        return done
    monkeypatch.setattr(_rewrites, "_scatter", spy)
    rng = np.random.default_rng(6)
    n, m = shape[1], shape[2]
    ca = rng.standard_normal((3, m // 2, 2 * n)).astype(np.float32)
    ca[:, 0, :3] = [-0.0, np.nan, 0.0]
    c = ember.tensor(ca)
    pa = rng.standard_normal(shape).astype(np.float32)

    def step(p):
        loss = 0.0
        for i in uses:
            r = p[i]
            if i in viewed:  # (2n, m/2) read transposed: its gradient is not in rows
                loss = loss + (r.view(2 * n, m // 2).t() * c[i]).sum()
            else:
                loss = loss + (r * c[i].reshape(n, m)).sum()
        loss.backward()
        return loss

    grads = []
    compiled = ember.compile(step)
    for f in (compiled, step):
        p = ember.tensor(pa, requires_grad=True)
        for _ in range(4):
            p.grad = None
            f(p)
        grads.append(p.grad.numpy().copy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert np.signbit(grads[0]).tolist() == np.signbit(grads[1]).tolist()
    assert compiled.stats["eager"] == 0
    # each viewed row's gradient went through its view on every planned call (a lone
    # row is no scatter: its view's backward and the row's run as eager's)
    assert all(through_view)
    assert len(through_view) == (len(viewed) * compiled.stats["replays"]
                                 if len(uses) > 1 else 0)
