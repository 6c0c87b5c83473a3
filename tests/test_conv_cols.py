"""The convolution's columns kept from the forward for the weight gradient: gradients
against torch over the geometries that build columns, the columns' lifetime (held only
while the graph holds its saved tensors, only when the weight needs a gradient, never
under saved-tensor hooks), and the paths that rebuild them (second derivatives,
retained graphs, in-place changes). Also the adjoints that add columns straight into
the unpadded result: transposed convolutions and fold with padding."""
import numpy as np
import pytest
import torch

import ember
import ember.nn  # noqa: F401
from ember.autograd.saved import _FREED

# (conv dim, x shape, w shape, kwargs)
GEOMS = [
    (2, (3, 4, 7, 6), (5, 4, 3, 3), {}),
    (2, (2, 6, 8, 7), (4, 3, 3, 2), dict(groups=2, stride=(2, 1), padding=1)),
    (2, (2, 3, 9, 8), (4, 3, 3, 3), dict(dilation=2, padding=2)),
    (2, (2, 5, 4, 4), (6, 5, 1, 1), {}),
    (2, (2, 16, 5, 5), (8, 16, 3, 3), dict(padding="same")),   # > 128 columns a window
    (2, (300, 32, 6, 6), (6, 16, 3, 3), dict(groups=2)),      # row columns: 2 blocks, groups
    (2, (17, 4, 6, 6), (6, 4, 3, 3), {}),                       # a batch-last input gradient
    (1, (2, 3, 11), (4, 3, 3), dict(stride=2, padding=1)),
    # kernel positions that meet only padding in some dims (skipped by the adjoint)
    (2, (2, 3, 5, 6), (4, 3, 2, 3), dict(stride=3, padding=2)),
    (2, (16, 4, 5, 5), (6, 4, 3, 3), dict(stride=2, padding=2, dilation=2)),
    (3, (2, 2, 4, 5, 3), (3, 2, 2, 2, 2), dict(padding=(1, 0, 1))),
]
IDS = [f"conv{d}d_{i}" for i, (d, *_) in enumerate(GEOMS)]


def _run(m, dim, xs, ws, kw, dtype, x_grad=True, w_grad=True, seed=0):
    rng = np.random.default_rng(seed)
    xa = rng.standard_normal(xs).astype(dtype)
    wa = rng.standard_normal(ws).astype(dtype)
    ba = rng.standard_normal(ws[0]).astype(dtype)
    x = m.tensor(xa, requires_grad=x_grad)
    w = m.tensor(wa, requires_grad=w_grad)
    b = m.tensor(ba, requires_grad=True)
    y = getattr(m.nn.functional, f"conv{dim}d")(x, w, b, **kw)
    gy = m.tensor(rng.standard_normal(tuple(y.shape)).astype(dtype))
    return x, w, b, y, gy


def _close(e, t, dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim,xs,ws,kw", GEOMS, ids=IDS)
def test_gradients_from_kept_columns(dim, xs, ws, kw, dtype):
    res = {}
    for m in (ember, torch):
        x, w, b, y, gy = _run(m, dim, xs, ws, kw, dtype)
        if m is ember:
            assert len(y.grad_fn._saved) == 3   # x, w and the columns
        y.backward(gy)
        res[m] = (y, x.grad, w.grad, b.grad)
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, dtype)


def test_columns_split_over_threads():
    prev = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        res = {}
        for m in (ember, torch):
            x, w, b, y, gy = _run(m, 2, (33, 8, 12, 12), (16, 8, 3, 3), {}, np.float32)
            y.backward(gy)
            res[m] = (y, x.grad, w.grad)
    finally:
        ember.set_num_threads(prev)
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float32)


def test_columns_freed_with_the_saved_tensors():
    x, w, b, y, gy = _run(ember, 2, (2, 3, 6, 6), (4, 3, 3, 3), {}, np.float32)
    node = y.grad_fn
    y.backward(gy)
    assert node._saved is _FREED
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward(gy)


def test_retained_graph_reuses_the_columns():
    res = {}
    for m in (ember, torch):
        x, w, b, y, gy = _run(m, 2, (2, 3, 6, 6), (4, 3, 3, 3), dict(padding=1), np.float64)
        y.backward(gy, retain_graph=True)
        y.backward(2 * gy)
        res[m] = (x.grad, w.grad, b.grad)
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float64)


def test_no_columns_without_a_weight_gradient():
    x, w, b, y, gy = _run(ember, 2, (2, 3, 6, 6), (4, 3, 3, 3), {}, np.float32, w_grad=False)
    assert len(y.grad_fn._saved) == 2
    tx, tw, tb, ty, tgy = _run(torch, 2, (2, 3, 6, 6), (4, 3, 3, 3), {}, np.float32,
                               w_grad=False)
    y.backward(gy)
    ty.backward(tgy)
    _close(x.grad, tx.grad, np.float32)
    assert w.grad is None and tw.grad is None


@pytest.mark.parametrize("cin", [3, 16], ids=["per_sample", "rows"])  # 27 / 144 columns
def test_rebuilt_columns_under_hooks_match_torch(cin):
    res = {}
    for m in (ember, torch):
        with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            x, w, b, y, gy = _run(m, 2, (3, cin, 6, 5), (4, cin, 3, 3), dict(padding=1),
                                  np.float64)
        y.backward(gy)
        res[m] = (x.grad, w.grad, b.grad)
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float64)


def test_no_columns_under_saved_tensor_hooks():
    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return t
    res = {}
    for m in (ember, torch):
        with m.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            x, w, b, y, gy = _run(m, 2, (2, 3, 6, 6), (4, 3, 3, 3), {}, np.float32)
        if m is ember:
            assert len(y.grad_fn._saved) == 2
        y.backward(gy)
        res[m] = (x.grad, w.grad, b.grad)
    # both libraries hand the hooks the same two tensors: input and weight
    assert packed[:2] == packed[2:] == [(2, 3, 6, 6), (4, 3, 3, 3)]
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float32)


def _conv_tanh(m):
    def fn(x, w, b):
        return m.nn.functional.conv2d(x, w, b, padding=1).tanh()
    return fn


def test_checkpoint_keeps_no_columns():
    res = {}
    for m in (ember, torch):
        x, w, b, _, gy = _run(m, 2, (2, 3, 7, 7), (4, 3, 3, 3), dict(padding=1), np.float64)
        y = m.utils.checkpoint.checkpoint(_conv_tanh(m), x, w, b, use_reentrant=False)
        y.backward(gy)
        res[m] = (x.grad, w.grad, b.grad)
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float64)


def test_second_derivatives_rebuild_the_columns():
    res = {}
    for m in (ember, torch):
        x, w, b, y, gy = _run(m, 2, (2, 3, 6, 5), (4, 3, 3, 2), dict(stride=2, padding=1),
                              np.float64)
        gx, gw = m.autograd.grad(y, (x, w), gy, create_graph=True)
        ((gw ** 2).sum() + (gx ** 2).sum()).backward()
        res[m] = (gx, gw, x.grad, w.grad)
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float64)


def test_input_changed_in_place_still_raises():
    for m in (ember, torch):
        x, w, b, _, gy = _run(m, 2, (2, 3, 6, 6), (4, 3, 3, 3), {}, np.float32)
        h = x * 1
        y = m.nn.functional.conv2d(h, w, b)
        with m.no_grad():
            h.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward(gy)


# conv_transpose2d (x shape, w shape, kwargs): strided, padded, output padding, dilated,
# grouped; these run the column adjoints with padding clipped away
TRANSPOSED = [
    ((2, 4, 4, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((16, 4, 3, 3), (4, 5, 3, 3), dict(stride=2, padding=2)),
    ((2, 6, 4, 3), (6, 2, 2, 3), dict(stride=(3, 2), padding=(2, 1), dilation=(2, 1),
                                      groups=3, output_padding=(1, 0))),
    ((2, 4, 5, 4), (4, 2, 3, 3), dict(stride=2, padding=1, groups=4)),    # depthwise, m=2
]


@pytest.mark.parametrize("xs,ws,kw", TRANSPOSED, ids=[str(i) for i in range(len(TRANSPOSED))])
def test_transposed_with_padding(xs, ws, kw):
    res = {}
    rng = np.random.default_rng(3)
    xa, wa = rng.standard_normal(xs), rng.standard_normal(ws)
    for m in (ember, torch):
        x = m.tensor(xa, requires_grad=True)
        w = m.tensor(wa, requires_grad=True)
        y = m.nn.functional.conv_transpose2d(x, w, **kw)
        y.backward(m.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape))))
        res[m] = (y, x.grad, w.grad)
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float64)


def test_fold_with_padding():
    rng = np.random.default_rng(4)
    col = rng.standard_normal((2, 3 * 2 * 3, 12))
    res = []
    for m in (ember, torch):
        c = m.tensor(col, requires_grad=True)
        out = m.nn.functional.fold(c, (5, 7), (2, 3), padding=(2, 1), stride=(3, 2))
        (out * m.tensor(np.arange(out.numel(), dtype=np.float64).reshape(
            tuple(out.shape)))).sum().backward()
        res.append((out, c.grad))
    for e, t in zip(*res):
        _close(e, t, np.float64)


def test_compiled_replay_gradients():
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((4, 3, 7, 7)).astype(np.float32) for _ in range(3)]
    ember.manual_seed(0)
    layer = ember.nn.Conv2d(3, 5, 3, stride=2, padding=1)
    tlayer = torch.nn.Conv2d(3, 5, 3, stride=2, padding=1)
    with torch.no_grad():
        tlayer.weight.copy_(torch.tensor(layer.weight.detach().numpy()))
        tlayer.bias.copy_(torch.tensor(layer.bias.detach().numpy()))
    compiled = ember.compile(layer)
    for xa in xs:   # capture, then replays of the plan with a graph recorded
        for m, f in ((ember, compiled), (torch, tlayer)):
            x = m.tensor(xa, requires_grad=True)
            (f(x).tanh() ** 2).sum().backward()
            if m is ember:
                ex = x
            else:
                _close(ex.grad, x.grad, np.float32)
    _close(layer.weight.grad, tlayer.weight.grad, np.float32)
    _close(layer.bias.grad, tlayer.bias.grad, np.float32)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_last_input_gradient_in_blocks(monkeypatch, threads):
    from ember.ops import _conv_kernels
    monkeypatch.setattr(_conv_kernels, "_LAST_BLOCK_BYTES", 1)   # blocks of 16 samples
    seen = []
    real = _conv_kernels._col2im_last
    monkeypatch.setattr(_conv_kernels, "_col2im_last",
                        lambda *a: seen.append(1) or real(*a))
    from ember.ops import conv as conv_ops
    monkeypatch.setattr(conv_ops, "_col2im_last", _conv_kernels._col2im_last)
    prev = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        res = {}
        for m in (ember, torch):
            # 35 samples: two full blocks and a ragged one; padding clipped away
            x, w, b, y, gy = _run(m, 2, (35, 4, 6, 5), (6, 4, 3, 3),
                                  dict(padding=(1, 2), stride=(1, 2)), np.float64)
            y.backward(gy)
            res[m] = (x.grad, w.grad)
    finally:
        ember.set_num_threads(prev)
    assert seen == [1]
    for e, t in zip(res[ember], res[torch]):
        _close(e, t, np.float64)


@pytest.mark.parametrize("shape", [(150, 16, 8, 8), (5, 16, 8, 8)], ids=["blocks", "one_block"])
def test_row_columns_same_bits_kept_or_rebuilt(shape):
    """Wide windows over small maps (row columns in blocks of samples): the forward
    under no_grad and the weight gradient rebuilt under saved-tensor hooks are the
    same products as with kept columns, to the bit; and they match torch."""
    from ember.ops import _conv_kernels
    assert _conv_kernels._rows(16 * 9, 36)
    assert len(_conv_kernels._row_blocks(shape[0], 36)) == (2 if shape[0] > 100 else 1)
    rng = np.random.default_rng(7)
    xa = rng.standard_normal(shape).astype(np.float32)
    wa = rng.standard_normal((12, 16, 3, 3)).astype(np.float32)
    ba = rng.standard_normal(12).astype(np.float32)
    gya = rng.standard_normal((shape[0], 12, 6, 6)).astype(np.float32)

    def run(m, hooks):
        x = m.tensor(xa)
        w, b = m.tensor(wa, requires_grad=True), m.tensor(ba, requires_grad=True)
        if hooks:
            with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                y = m.nn.functional.conv2d(x, w, b)
        else:
            y = m.nn.functional.conv2d(x, w, b)
        y.backward(m.tensor(gya))
        return y.detach().numpy(), w.grad.numpy(), b.grad.numpy()
    kept, rebuilt = run(ember, False), run(ember, True)
    with ember.no_grad():
        plain = ember.nn.functional.conv2d(ember.tensor(xa), ember.tensor(wa),
                                           ember.tensor(ba)).numpy()
    for a, b in zip(kept, rebuilt):
        assert a.tobytes() == b.tobytes()
    assert plain.tobytes() == kept[0].tobytes()
    for a, t in zip(kept, run(torch, False)):
        np.testing.assert_allclose(a, t, rtol=1e-4, atol=1e-4)


# stride-1 input gradients on the batch-last path (at least 16 samples, at most 128 output
# positions, at least 32 columns a window): its columns in the span layout
SPAN_LAST = [
    (2, (20, 16, 13, 13), (8, 16, 3, 3), {}),
    (2, (17, 16, 7, 9), (12, 8, 3, 2), dict(groups=2, padding=(2, 1), dilation=(2, 1))),
    (2, (16, 16, 6, 5), (24, 16, 2, 3), dict(padding="same")),    # uneven padding
    (1, (33, 24, 11), (6, 8, 5), dict(groups=3, padding=2)),
    (3, (16, 4, 5, 5, 4), (4, 4, 2, 2, 3), dict(padding=(1, 0, 1))),
]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim,xs,ws,kw", SPAN_LAST,
                         ids=[f"conv{d}d_{i}" for i, (d, *_) in enumerate(SPAN_LAST)])
def test_span_batch_last_input_gradient(monkeypatch, dim, xs, ws, kw, dtype, threads):
    """The span layout's contiguous adds add the strided adds' terms in the same order
    (the runs' gap columns are exact zeros): the same values up to how the BLAS
    rounds products of another length, and both match torch."""
    from ember.ops import _conv_kernels
    from ember.ops import conv as conv_ops
    seen = []
    real = _conv_kernels._col2im_last
    monkeypatch.setattr(conv_ops, "_col2im_last", lambda *a: seen.append(1) or real(*a))
    # the span layout for every geometry here, whatever the rule that picks it by speed
    monkeypatch.setattr(_conv_kernels, "_span_last_pays", lambda g, *a: True)
    prev = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        res = {}
        for m in (ember, torch):
            x, w, b, y, gy = _run(m, dim, xs, ws, kw, dtype, w_grad=False)
            y.backward(gy)
            res[m] = x.grad
        # the same input gradient through the strided adds
        monkeypatch.setattr(_conv_kernels, "_span_last_pays", lambda g, *a: False)
        x, w, b, y, gy = _run(ember, dim, xs, ws, kw, dtype, w_grad=False)
        y.backward(gy)
    finally:
        ember.set_num_threads(prev)
    assert seen == [1, 1]
    tight = dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(res[ember].numpy(), x.grad.numpy(), **tight)
    _close(res[ember], res[torch], dtype)


def test_span_batch_last_taken_where_it_pays():
    """The span layout for the CNN's conv2 (its 16-sample columns overflow the block
    budget); the strided adds where a block's columns fit, the runs are long against
    the outputs, or the stride is not 1."""
    from ember.ops._conv_kernels import Geom, _span_last_pays

    def pays(S, O, lo, s=(1, 1)):
        return _span_last_pays(Geom(S, O, (3, 3), s, (1, 1), lo, lo, 1), 32 * 9,
                               O[0] * O[1], 4)
    assert pays((13, 13), (11, 11), (0, 0))
    assert pays((11, 11), (11, 11), (1, 1))
    assert not pays((12, 12), (10, 10), (0, 0))     # 16 samples' columns fit
    assert not pays((4, 4), (4, 4), (1, 1))         # runs 1.4x the outputs
    assert not pays((23, 23), (11, 11), (1, 1), (2, 2))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64, np.bool_])
def test_columns_copied_as_runs_keep_the_bytes(dtype):
    """im2col and im2col_rows copy each window row as one run: the same bytes as an
    element-by-element copy (NaN payloads and signed zeros included), for padded,
    strided and dilated windows, and for runs of one element."""
    from ember.ops import _conv_kernels as K
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 3, 9, 8)) * 4).astype(dtype)
    if x.dtype.kind == "f":
        x.reshape(-1)[:6] = [np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf]
        x.view(np.uint8)[-1] ^= 1          # a changed payload bit
    for K_, s, d, lo, hi in [((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
                             ((2, 3), (2, 1), (1, 2), (0, 1), (1, 0)),
                             ((3, 1), (1, 3), (1, 1), (0, 0), (0, 0))]:
        O = tuple((a + p + q - e * (k - 1) - 1) // t + 1
                  for a, p, q, e, k, t in zip(x.shape[2:], lo, hi, d, K_, s))
        g = K.Geom(x.shape[2:], O, K_, s, d, lo, hi, 1)
        win = K.windows(K.pad_array(x, lo, hi), O, K_, s, d)
        ref = np.array(win.transpose(0, 1, 4, 5, 2, 3), order="C")
        assert K.im2col(x, g).tobytes() == ref.tobytes()
        ref_rows = np.array(win.transpose(1, 4, 5, 0, 2, 3), order="C")
        assert K.im2col_rows(x, g).tobytes() == ref_rows.tobytes()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("span", [True, False], ids=["span", "strided_adds"])
@pytest.mark.parametrize("xs,ws,kw", [((20, 16, 13, 13), (8, 16, 3, 3), {}),
                                      ((17, 16, 9, 9), (24, 16, 3, 3), dict(padding=1))],
                         ids=["valid", "padded"])
def test_batch_last_moves_by_blas_keep_the_bytes(monkeypatch, xs, ws, kw, span, threads):
    """The batch-last input gradient moves its float32 blocks between (N, ...) and
    (..., N) order by BLAS's transposition (where no crop is needed): the same bytes as
    NumPy's copies, with NaN and infinities in the gradient, at one and two threads;
    and torch's values."""
    from ember.ops import _conv_kernels, _rnn_blas
    monkeypatch.setattr(_conv_kernels, "_span_last_pays", lambda g, *a: span)
    _rnn_blas.transpose(np.zeros((2, 3), np.float32))  # BLAS's functions looked up
    blas = _rnn_blas._SGEMM["omatcopy"] is not None
    moved = []
    real = _rnn_blas.transpose
    monkeypatch.setattr(_rnn_blas, "transpose", lambda *a, **k: moved.append(1) or real(*a, **k))
    rng = np.random.default_rng(11)
    xa = rng.standard_normal(xs).astype(np.float32)
    wa = rng.standard_normal(ws).astype(np.float32)
    with torch.no_grad():
        out_shape = tuple(torch.nn.functional.conv2d(torch.tensor(xa), torch.tensor(wa),
                                                     **kw).shape)
    gya = rng.standard_normal(out_shape).astype(np.float32)
    gya.reshape(-1)[::97] = np.nan
    gya.reshape(-1)[5::101] = -np.inf
    gya.reshape(-1)[7::89] = -0.0

    def grad(m):
        x = m.tensor(xa, requires_grad=True)
        m.nn.functional.conv2d(x, m.tensor(wa), **kw).backward(m.tensor(gya))
        return x.grad.numpy()
    prev = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        fast = grad(ember)
        used = len(moved)
        monkeypatch.setitem(_rnn_blas._SGEMM, "omatcopy", None)   # NumPy's copies
        slow = grad(ember)
    finally:
        ember.set_num_threads(prev)
    # (two moves a block on the strided adds; the span layout's one, unless its plane
    # needs a crop)
    assert (used > 0) == (blas and not (span and kw))
    assert fast.tobytes() == slow.tobytes()
    np.testing.assert_allclose(fast, grad(torch), rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("finite", [True, False, None],
                         ids=["finite", "nan_inf", "nan_in_one_block"])
@pytest.mark.parametrize("xs,ws,kw", [((40, 32, 13, 13), (64, 32, 3, 3), {}),
                                      ((20, 17, 11, 11), (40, 17, 3, 3), dict(padding=1)),
                                      ((18, 6, 9, 9), (8, 6, 2, 3), dict(dilation=(2, 1)))],
                         ids=["cnn_conv2", "padded_odd_channels", "dilated"])
def test_span_input_gradient_added_by_products_keeps_the_bytes(monkeypatch, xs, ws, kw,
                                                               finite, threads):
    """The batch-last span-layout input gradient adds each kernel position's product
    straight into the plane (``sgemm`` with beta = 1, no columns array) where a probe
    finds that gives the columns' product and adds to the bit: the same bytes as the
    columns' route, with signed zeros in the gradient, at one and two threads; torch's
    values. Where the probe finds other bits (a BLAS that rounds the shorter products
    differently), and for a gradient with NaN or infinities (where two NaNs meet, the
    add and BLAS keep different signs), the columns' route runs."""
    from ember.ops import _conv_accumulate, _conv_kernels, _rnn_blas
    monkeypatch.setattr(_conv_kernels, "_span_last_pays", lambda g, *a: True)
    monkeypatch.setattr(_conv_accumulate, "ACCUMULATES", {})
    calls = []
    real = _conv_accumulate.accumulate
    real_accumulation = _conv_accumulate.accumulation
    monkeypatch.setattr(_conv_accumulate, "accumulate",
                        lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(5)
    xa = rng.standard_normal(xs).astype(np.float32)
    wa = rng.standard_normal(ws).astype(np.float32)
    with torch.no_grad():
        out_shape = tuple(torch.nn.functional.conv2d(torch.tensor(xa), torch.tensor(wa),
                                                     **kw).shape)
    gya = rng.standard_normal(out_shape).astype(np.float32)
    gya.reshape(-1)[7::89] = -0.0
    if finite is False:
        gya.reshape(-1)[::97] = np.nan
        gya.reshape(-1)[5::101] = -np.inf
    elif finite is None:  # the first block of samples the columns' way, the others not
        gya[0].reshape(-1)[::7] = np.nan
        gya[0, 0, 0, 0] = np.inf

    def grad(m):
        x = m.tensor(xa, requires_grad=True)
        m.nn.functional.conv2d(x, m.tensor(wa), **kw).backward(m.tensor(gya))
        return x.grad.numpy()
    prev = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        fast = grad(ember)
        if finite is False:
            assert not calls and not _conv_accumulate.ACCUMULATES
        if not finite:
            assert fast.tobytes() == _off(monkeypatch, _conv_accumulate, grad).tobytes()
            if finite is None:  # (a batch of 20 at one thread is one block: no calls)
                acc = _conv_accumulate.ACCUMULATES
                assert (len(calls) > 0) == (bool(acc) and all(acc.values()))
            return
        probed = dict(_conv_accumulate.ACCUMULATES)
        used = len(calls)
        monkeypatch.setattr(_conv_accumulate, "accumulation", lambda *a: None)
        slow = grad(ember)
        # a BLAS whose products of fewer rows round otherwise: the probe refuses
        monkeypatch.setattr(_conv_accumulate, "accumulation", real_accumulation)
        monkeypatch.setattr(_conv_accumulate, "ACCUMULATES", {})
        found = _rnn_blas.sgemm(8, 8, 8)

        def off_by_a_bit(*a):
            a = list(a)
            a[6] = 1.0000001  # alpha
            return found[0](*a)
        monkeypatch.setattr(_rnn_blas, "sgemm", lambda *a: (off_by_a_bit, 0))
        n_before = len(calls)
        refused = grad(ember)
    finally:
        ember.set_num_threads(prev)
    # (OpenBLAS's SkylakeX kernels pass the probe; other BLAS kernels may not)
    assert probed and (used > 0) == all(probed.values())
    assert len(calls) == n_before
    assert not any(_conv_accumulate.ACCUMULATES.values())
    assert fast.tobytes() == slow.tobytes() == refused.tobytes()
    np.testing.assert_allclose(fast, grad(torch), rtol=1e-4, atol=1e-4, equal_nan=True)


def _off(monkeypatch, kernels, grad):
    """``grad(ember)`` with the input gradient's products-into-the-plane route off."""
    with monkeypatch.context() as mp:
        mp.setattr(kernels, "accumulation", lambda *a: None)
        return grad(ember)
