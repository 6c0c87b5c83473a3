"""The fast paths of convolution, pooling and normalization against torch: each row is
shaped to take one path (checked by ``test_paths_taken``), and the blocked loops run
with tiny blocks so that several blocks (and a ragged last one) are exercised."""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check

import ember
import ember.nn  # noqa: F401
from ember.ops import conv as conv_ops
from ember.ops import norm_layouts as norm_ops


def F(m):
    return m.nn.functional


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    monkeypatch.setattr(conv_ops, "_BLOCK_BYTES", 700)
    monkeypatch.setattr(norm_ops, "_BLOCK_BYTES", 300)


def _conv(**kw):
    def fn(m, x, w, b=None):
        return F(m).conv2d(x, w, b, **kw)
    return fn


# (name, x shape, w shape, conv2d kwargs, the ConvInput path the input gradient takes)
CONV_PATHS = [
    ("transposed", (2, 16, 6, 5), (16, 16, 3, 3), dict(padding=1), "transposed"),
    ("transposed_crop", (2, 16, 4, 5), (12, 16, 1, 2), dict(padding=(1, 2)), "transposed"),
    ("transposed_groups", (2, 32, 5, 5), (32, 16, 3, 3), dict(padding=1, groups=2),
     "transposed"),
    ("span", (2, 4, 7, 6), (8, 4, 3, 3), {}, "span"),
    ("span_dilated", (2, 4, 8, 7), (6, 4, 3, 3), dict(dilation=(2, 1), padding=(1, 0)), "span"),
    ("last", (16, 4, 6, 6), (6, 4, 3, 3), {}, "last"),
    ("last_strided", (16, 4, 7, 6), (5, 4, 3, 3), dict(stride=2, padding=1), "last"),
    ("last_groups", (16, 8, 5, 5), (4, 4, 3, 3), dict(groups=2, padding=1), "last"),
    ("col2im", (2, 3, 7, 6), (4, 3, 3, 3), dict(stride=2), "col2im"),
    ("gemm", (2, 5, 4, 3), (6, 5, 1, 1), {}, "gemm"),
]

CONV = [Case(f"conv_{name}", _conv(**kw), [xs, ws, (ws[0],)])
        for name, xs, ws, kw, _ in CONV_PATHS] + [
    # the weight gradient as one product over all samples (> 128 columns per window),
    # where the columns are rebuilt (the oracle's gradients are taken with create_graph)
    Case("conv_weight_rows", _conv(padding=1), [(2, 16, 5, 4), (3, 16, 3, 3)]),
    # depthwise: stride 1 in blocks of samples, its input gradient a depthwise conv
    Case("depthwise", _conv(groups=5, padding=1), [(3, 5, 6, 7), (5, 1, 3, 3), (5,)]),
    Case("depthwise_crop", _conv(groups=3, padding=(1, 2)), [(2, 3, 5, 5), (3, 1, 1, 3)]),
    Case("depthwise_m2", _conv(groups=3, padding=1), [(2, 3, 5, 4), (6, 1, 3, 3)]),
    Case("depthwise_strided", _conv(groups=4, stride=2, padding=1),
         [(3, 4, 7, 6), (4, 1, 3, 3), (4,)]),
    Case("depthwise_1d", lambda m, x, w: F(m).conv1d(x, w, groups=4, padding=2, dilation=2),
         [(3, 4, 9), (4, 1, 3)]),
    Case("depthwise_f32", _conv(groups=8, padding=1), [(3, 8, 6, 6), (8, 1, 3, 3)],
         dtype=np.float32, rtol=1e-4, atol=1e-4),
    # conv_transpose runs ConvInput forward: stride 1 with output padding (< dilation)
    Case("conv_t_transposed_outpad", lambda m, x, w: F(m).conv_transpose2d(
        x, w, dilation=2, output_padding=1), [(2, 16, 4, 3), (16, 16, 3, 3)]),
    Case("conv_t_last", lambda m, x, w: F(m).conv_transpose2d(x, w, stride=2, padding=1),
         [(16, 4, 3, 3), (4, 5, 3, 3)]),
]


@cases(CONV)
def test_conv_paths(case):
    check(case)


@pytest.mark.parametrize("name,xs,ws,kw,path", CONV_PATHS, ids=[c[0] for c in CONV_PATHS])
def test_paths_taken(name, xs, ws, kw, path):
    seen = []
    real = conv_ops._input_path

    def spy(g, n, fg, cg):
        seen.append(real(g, n, fg, cg))
        return seen[-1]
    try:
        conv_ops._input_path = spy
        x = ember.randn(*xs, requires_grad=True)
        F(ember).conv2d(x, ember.randn(*ws), **kw).sum().backward()
    finally:
        conv_ops._input_path = real
    assert seen == [path]


def _pool(**kw):
    def fn(m, x):
        return F(m).max_pool2d(x, return_indices=True, **kw)
    return fn


def _ties(shape, nan=False):
    """Rounded values (many ties), some -inf, and optionally NaNs."""
    def make(rng):
        x = np.round(rng.standard_normal(shape))
        x[rng.random(shape) < 0.1] = -np.inf
        if nan:
            x[rng.random(shape) < 0.05] = np.nan
        return [x]
    return make


POOL = [
    # a kernel position inside every window: the first maximum among ties, -inf windows
    Case("max_2x2_ties", _pool(kernel_size=2), _ties((2, 3, 7, 6)), gradgrad=False),
    Case("max_3x3_pad_ties", _pool(kernel_size=3, stride=2, padding=1), _ties((2, 3, 7, 8)),
         gradgrad=False),
    Case("max_3x3_pad_nan", _pool(kernel_size=3, stride=2, padding=1),
         _ties((2, 2, 6, 7), nan=True), grad=False),
    Case("max_dilated_ties", _pool(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 1)),
         _ties((1, 2, 6, 7)), gradgrad=False),
    # no kernel position covers every window (ceil_mode past the padding)
    Case("max_ceil_uncovered", _pool(kernel_size=3, stride=2, padding=1, ceil_mode=True),
         _ties((2, 2, 4, 4)), gradgrad=False),
    Case("max_sq", lambda m, x: F(m).max_pool2d(x, 3, 1, 1) ** 2, [(2, 2, 5, 4)]),
]


@cases(POOL)
def test_pool_paths(case):
    check(case)


def _bn(m, x, w, b):
    return F(m).batch_norm(x, None, None, w, b, training=True)


NORM = []
for first in (False, True):  # second derivatives, or the blocked first-order backward
    tag = "_first" if first else ""
    NORM += [
        Case(f"layer_norm_rows{tag}", lambda m, x, w, b: F(m).layer_norm(x, (3, 5), w, b),
             [(4, 3, 3, 5), (3, 5), (3, 5)], gradgrad=not first),
        Case(f"layer_norm_weight_only{tag}", lambda m, x, w: F(m).layer_norm(x, (6,), w),
             [(7, 6), (6,)], gradgrad=not first),
        Case(f"layer_norm_plain{tag}", lambda m, x: F(m).layer_norm(x, (6,)), [(5, 2, 6)],
             gradgrad=not first),
        Case(f"group_norm{tag}", lambda m, x, w, b: F(m).group_norm(x, 2, w, b),
             [(3, 6, 4, 5), (6,), (6,)], gradgrad=not first),
        Case(f"group_norm_weight_only{tag}", lambda m, x, w: F(m).group_norm(x, 3, w),
             [(2, 6, 7), (6,)], gradgrad=not first),
        Case(f"instance_norm{tag}", lambda m, x, w, b: F(m).instance_norm(x, weight=w, bias=b),
             [(3, 4, 5, 6), (4,), (4,)], gradgrad=not first),
        Case(f"batch_norm{tag}", _bn, [(5, 3, 4, 6), (3,), (3,)], gradgrad=not first),
        Case(f"batch_norm_3d{tag}", _bn, [(6, 4, 9), (4,), (4,)], gradgrad=not first),
        Case(f"batch_norm_offset{tag}", _bn,
             lambda rng: [rng.standard_normal((4, 3, 5, 5)) * 0.1 + 50.0,
                          rng.standard_normal(3), rng.standard_normal(3)],
             gradgrad=not first),
    ]
NORM += [
    # torch has no second derivative for a bias without a weight here
    Case("instance_norm_bias_only", lambda m, x, b: F(m).instance_norm(x, bias=b),
         [(2, 3, 4, 5), (3,)], gradgrad=False),
    Case("layer_norm_f32", lambda m, x, w, b: F(m).layer_norm(x, (16,), w, b),
         [(9, 16), (16,), (16,)], dtype=np.float32, rtol=1e-4, atol=1e-4, gradgrad=False),
    Case("batch_norm_f32", _bn, [(4, 5, 6, 6), (5,), (5,)], dtype=np.float32, rtol=1e-4,
         atol=1e-4, gradgrad=False),
]


@cases(NORM)
def test_norm_paths(case):
    check(case)


def test_norm_running_stats_blocked():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3, 5, 4)) * 2 + 1
    stats = {}
    for m in (ember, torch):
        rm, rv = m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64)
        F(m).batch_norm(m.tensor(x), rm, rv, training=True, momentum=0.3)
        im, iv = m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64)
        F(m).instance_norm(m.tensor(x), im, iv, momentum=0.3)
        stats[m] = [t.numpy() for t in (rm, rv, im, iv)]
    for a, b in zip(stats[ember], stats[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


LAYOUTS = [
    ("rows", lambda x: F(ember).layer_norm(x, (4, 5), ember.ones(4, 5), ember.zeros(4, 5)),
     (3, 4, 5)),
    ("groups", lambda x: F(ember).layer_norm(x, (5,)), (3, 4, 5)),
    ("groups", lambda x: F(ember).group_norm(x, 2, ember.ones(4), ember.zeros(4)), (3, 4, 5)),
    ("channels", lambda x: F(ember).instance_norm(x, weight=ember.ones(4)), (3, 4, 5)),
    ("channels", lambda x: F(ember).batch_norm(x, None, None, ember.ones(4), None, True),
     (3, 4, 5)),
    (None, lambda x: F(ember).batch_norm(x, None, None, ember.ones(4), None, True), (3, 4)),
]


@pytest.mark.parametrize("layout,fn,shape", LAYOUTS)
def test_norm_layouts(layout, fn, shape):
    y = fn(ember.randn(*shape, requires_grad=True))
    node = y.grad_fn
    while not hasattr(node, "layout"):  # group norm reshapes its output
        node = node.next_functions[0][0]
    assert (node.layout and node.layout[0]) == layout
