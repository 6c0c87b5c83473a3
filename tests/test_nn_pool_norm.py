"""Pooling, normalization, interpolation, pixel shuffle and padding layers against torch:
values, indices, gradients, second gradients, running statistics, errors and reprs."""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check, check_raises

import ember
import ember.nn  # noqa: F401


def F(m):
    return m.nn.functional


def _pool(name, **kw):
    def fn(m, x):
        return getattr(F(m), name)(x, **kw)
    return fn


def _sq(fn):
    """``fn(x) ** 2``: its second derivative runs the pooling gradient's own backward."""
    def g(m, x):
        out = fn(m, x)
        return (out[0] ** 2, out[1]) if isinstance(out, tuple) else out ** 2
    return g


POOL = [
    Case("max_pool1d", _pool("max_pool1d", kernel_size=3), [(2, 3, 10)]),
    Case("max_pool1d_args", _pool("max_pool1d", kernel_size=3, stride=2, padding=1,
                                  dilation=2, ceil_mode=True, return_indices=True), [(2, 2, 11)]),
    Case("max_pool2d", _pool("max_pool2d", kernel_size=2), [(2, 3, 6, 6)]),
    Case("max_pool2d_odd", _pool("max_pool2d", kernel_size=2), [(2, 3, 7, 5)]),
    Case("max_pool2d_overlap", _sq(_pool("max_pool2d", kernel_size=3, stride=2, padding=1)),
         [(2, 2, 7, 8)]),
    Case("max_pool2d_ceil", _pool("max_pool2d", kernel_size=(3, 2), stride=(2, 2),
                                  ceil_mode=True, return_indices=True), [(2, 2, 8, 7)]),
    Case("max_pool2d_dilation", _sq(_pool("max_pool2d", kernel_size=2, dilation=(2, 1),
                                          padding=1, return_indices=True)), [(1, 3, 6, 5)]),
    Case("max_pool2d_unbatched", _pool("max_pool2d", kernel_size=2, stride=1), [(3, 4, 5)]),
    Case("max_pool2d_f32", _pool("max_pool2d", kernel_size=2, return_indices=True),
         [(2, 4, 8, 8)], dtype=np.float32),
    Case("max_pool3d", _pool("max_pool3d", kernel_size=2, stride=(1, 2, 2), padding=1,
                             return_indices=True), [(1, 2, 4, 5, 4)]),
    Case("avg_pool1d", _pool("avg_pool1d", kernel_size=3, stride=2, padding=1), [(2, 3, 9)]),
    Case("avg_pool1d_ceil", _pool("avg_pool1d", kernel_size=2, ceil_mode=True,
                                  count_include_pad=False), [(2, 3, 9)]),
    Case("avg_pool2d", _pool("avg_pool2d", kernel_size=2), [(2, 3, 6, 6)]),
    Case("avg_pool2d_pad", _pool("avg_pool2d", kernel_size=3, stride=2, padding=1),
         [(2, 2, 7, 6)]),
    Case("avg_pool2d_no_pad_count", _pool("avg_pool2d", kernel_size=3, stride=2, padding=1,
                                          count_include_pad=False), [(2, 2, 7, 6)]),
    Case("avg_pool2d_ceil", _pool("avg_pool2d", kernel_size=(3, 2), stride=2, padding=(1, 1),
                                  ceil_mode=True), [(1, 2, 8, 7)]),
    Case("avg_pool2d_ceil_nocount", _pool("avg_pool2d", kernel_size=3, stride=2, padding=1,
                                          ceil_mode=True, count_include_pad=False),
         [(1, 2, 8, 6)]),
    Case("avg_pool2d_divisor", _pool("avg_pool2d", kernel_size=2, divisor_override=3),
         [(2, 2, 4, 6)]),
    Case("avg_pool2d_sq", _sq(_pool("avg_pool2d", kernel_size=2, stride=1)), [(1, 2, 4, 4)]),
    Case("avg_pool3d", _pool("avg_pool3d", kernel_size=2, padding=1), [(1, 2, 3, 4, 5)]),
    Case("adaptive_avg1d", _pool("adaptive_avg_pool1d", output_size=4), [(2, 3, 10)]),
    Case("adaptive_avg2d_div", _pool("adaptive_avg_pool2d", output_size=(2, 3)),
         [(2, 3, 6, 6)]),
    Case("adaptive_avg2d_uneven", _pool("adaptive_avg_pool2d", output_size=(4, 3)),
         [(2, 3, 7, 5)]),
    Case("adaptive_avg2d_global", _pool("adaptive_avg_pool2d", output_size=1), [(2, 3, 5, 4)]),
    Case("adaptive_avg2d_none", _pool("adaptive_avg_pool2d", output_size=(None, 2)),
         [(2, 3, 5, 4)]),
    Case("adaptive_avg2d_up", _pool("adaptive_avg_pool2d", output_size=(6, 5)), [(1, 2, 4, 3)]),
    Case("adaptive_avg3d", _pool("adaptive_avg_pool3d", output_size=(2, 3, 1)),
         [(1, 2, 5, 4, 3)]),
    Case("adaptive_max1d", _pool("adaptive_max_pool1d", output_size=3, return_indices=True),
         [(2, 3, 10)]),
    Case("adaptive_max2d", _sq(_pool("adaptive_max_pool2d", output_size=(3, 2),
                                     return_indices=True)), [(2, 3, 7, 5)]),
    Case("adaptive_max2d_global", _pool("adaptive_max_pool2d", output_size=1), [(2, 3, 4, 4)]),
    Case("adaptive_max3d", _pool("adaptive_max_pool3d", output_size=2), [(1, 2, 3, 5, 4)]),
    Case("lp_pool1d", _pool("lp_pool1d", norm_type=2, kernel_size=3, stride=2), [(2, 3, 9)],
         low=0.2, high=2.0),
    Case("lp_pool2d", _pool("lp_pool2d", norm_type=3, kernel_size=2), [(2, 2, 6, 5)],
         low=0.2, high=2.0),
]


def _unpool(m, x):
    out, idx = F(m).max_pool2d(x, 2, return_indices=True)
    return F(m).max_unpool2d(out * 2, idx, 2, output_size=(x.shape[2], x.shape[3]))


def _unpool1d(m, x):
    out, idx = F(m).max_pool1d(x, 3, stride=2, return_indices=True)
    return F(m).max_unpool1d(out, idx, 3, stride=2)


POOL += [
    Case("max_unpool2d", _unpool, [(2, 3, 6, 5)]),
    Case("max_unpool1d", _unpool1d, [(2, 3, 9)]),
]


@cases(POOL)
def test_pool(case):
    check(case)


def test_integer_pools():
    x = np.random.default_rng(0).integers(-20, 20, (2, 3, 7, 6))
    for name, kw in [("max_pool2d", dict(kernel_size=3, stride=2, padding=1)),
                     ("avg_pool2d", dict(kernel_size=2)),
                     ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1))]:
        e = getattr(ember.nn.functional, name)(ember.tensor(x), **kw)
        t = getattr(torch.nn.functional, name)(torch.tensor(x), **kw)
        assert e.dtype == ember.int64
        np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_max_pool_nan_and_ties():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 0, 1] = np.nan
    x[0, 0, 2:, 2:] = 1.0
    e, ei = ember.nn.functional.max_pool2d(ember.tensor(x), 2, return_indices=True)
    t, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())


POOL_ERRORS = [
    ("max_pad", lambda m, x: F(m).max_pool2d(x, 2, padding=2), [(1, 2, 5, 5)]),
    ("max_stride0", lambda m, x: F(m).max_pool2d(x, 2, stride=0), [(1, 2, 5, 5)]),
    ("max_too_small", lambda m, x: F(m).max_pool2d(x, 3), [(1, 1, 2, 2)]),
    ("max_dims", lambda m, x: F(m).max_pool2d(x, 2), [(5, 5)]),
    ("max_dilation0", lambda m, x: F(m).max_pool2d(x, 2, dilation=0), [(1, 2, 5, 5)]),
    ("avg_pad", lambda m, x: F(m).avg_pool2d(x, 2, padding=2), [(1, 2, 5, 5)]),
    ("avg_divisor0", lambda m, x: F(m).avg_pool2d(x, 2, divisor_override=0), [(1, 2, 4, 4)]),
    ("adaptive_dims", lambda m, x: F(m).adaptive_avg_pool2d(x, 2), [(5,)]),
    ("adaptive_max_dims", lambda m, x: F(m).adaptive_max_pool2d(x, 2), [(5, 4)]),
    ("unpool_size", lambda m, x: F(m).max_unpool2d(*F(m).max_pool2d(x, 2, return_indices=True),
                                                    2, output_size=(9, 9)), [(1, 1, 4, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", POOL_ERRORS, ids=[e[0] for e in POOL_ERRORS])
def test_pool_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


# ----- normalization (functional) ------------------------------------------------------

def _bn(training, **kw):
    def fn(m, x, w, b, rm=None, rv=None):
        return F(m).batch_norm(x, rm, rv, w, b, training=training, **kw)
    return fn


def _bn_inputs(shape, stats=False):
    def make(rng):
        c = shape[1]
        out = [rng.standard_normal(shape), rng.standard_normal(c), rng.standard_normal(c)]
        if stats:
            out += [rng.standard_normal(c), rng.uniform(0.5, 2.0, c)]
        return out
    return make


NORM = [
    Case("batch_norm_train_2d", _bn(True), _bn_inputs((6, 4))),
    Case("batch_norm_train_3d", _bn(True, eps=1e-3), _bn_inputs((3, 4, 5))),
    Case("batch_norm_train_4d", _bn(True), _bn_inputs((3, 4, 3, 5))),
    Case("batch_norm_train_5d", _bn(True), _bn_inputs((2, 3, 2, 3, 2))),
    Case("batch_norm_train_f32", _bn(True), _bn_inputs((4, 3, 4, 4)), dtype=np.float32,
         rtol=1e-4, atol=1e-5),
    Case("batch_norm_eval", _bn(False), _bn_inputs((3, 4, 3, 5), stats=True),
         requires_grad=[True, True, True, False, False]),
    Case("batch_norm_noaffine", lambda m, x: F(m).batch_norm(x, None, None, training=True),
         [(5, 3, 4)]),
    Case("layer_norm", lambda m, x, w, b: F(m).layer_norm(x, (4, 5), w, b),
         [(3, 4, 5), (4, 5), (4, 5)]),
    Case("layer_norm_last", lambda m, x, w: F(m).layer_norm(x, (6,), w, eps=1e-3),
         [(2, 3, 6), (6,)]),
    Case("layer_norm_plain", lambda m, x: F(m).layer_norm(x, [7]), [(4, 7)]),
    Case("layer_norm_f32", lambda m, x, w, b: F(m).layer_norm(x, (8,), w, b),
         [(4, 8), (8,), (8,)], dtype=np.float32, rtol=1e-4, atol=1e-5),
    Case("group_norm", lambda m, x, w, b: F(m).group_norm(x, 3, w, b),
         [(2, 6, 4, 3), (6,), (6,)]),
    Case("group_norm_1d", lambda m, x: F(m).group_norm(x, 2, eps=1e-3), [(3, 4, 5)]),
    Case("group_norm_2d_input", lambda m, x, w, b: F(m).group_norm(x, 2, w, b),
         [(3, 6), (6,), (6,)]),
    Case("instance_norm", lambda m, x, w, b: F(m).instance_norm(x, weight=w, bias=b),
         [(2, 3, 4, 5), (3,), (3,)]),
    Case("instance_norm_1d", lambda m, x: F(m).instance_norm(x), [(2, 3, 7)]),
    # first derivatives only: the fused array backward (no graph recorded)
    Case("batch_norm_train_first", _bn(True), _bn_inputs((3, 4, 3, 5)), gradgrad=False),
    Case("batch_norm_stats_first", _bn(True), _bn_inputs((4, 3, 5), stats=True),
         gradgrad=False, requires_grad=[True, True, True, False, False]),
    Case("layer_norm_first", lambda m, x, w, b: F(m).layer_norm(x, (4, 5), w, b),
         [(3, 4, 5), (4, 5), (4, 5)], gradgrad=False),
    Case("layer_norm_first_nob", lambda m, x, w: F(m).layer_norm(x, (5,), w),
         [(3, 4, 5), (5,)], gradgrad=False),
    Case("group_norm_first", lambda m, x, w, b: F(m).group_norm(x, 2, w, b),
         [(2, 6, 4, 3), (6,), (6,)], gradgrad=False),
    Case("instance_norm_first", lambda m, x, b: F(m).instance_norm(x, bias=b),
         [(2, 3, 4, 5), (3,)], gradgrad=False),
    Case("rms_norm", lambda m, x, w: F(m).rms_norm(x, (4, 5), w), [(3, 4, 5), (4, 5)]),
    Case("rms_norm_eps", lambda m, x: F(m).rms_norm(x, [5], eps=1e-3), [(3, 5)]),
    Case("rms_norm_f32", lambda m, x: F(m).rms_norm(x, [6]), [(3, 6)], dtype=np.float32),
    Case("torch_rms_norm", lambda m, x, w: m.rms_norm(x, [4], w), [(2, 4), (4,)]),
    Case("max_pool2d_with_indices", lambda m, x: F(m).max_pool2d_with_indices(x, 2),
         [(1, 2, 4, 5)]),
    Case("adaptive_max_pool2d_with_indices",
         lambda m, x: F(m).adaptive_max_pool2d_with_indices(x, 2), [(1, 2, 4, 5)]),
    Case("local_response_norm", lambda m, x: F(m).local_response_norm(x, 3),
         [(2, 5, 4, 3)]),
    Case("local_response_norm_even", lambda m, x: F(m).local_response_norm(x, 4, 1e-2, 0.5, 2.0),
         [(2, 6, 5)]),
    Case("local_response_norm_5d", lambda m, x: F(m).local_response_norm(x, 2),
         [(1, 4, 2, 3, 2)]),
]


@cases(NORM)
def test_norm(case):
    check(case)


def test_batch_norm_running_stats():
    rng = np.random.default_rng(0)
    stats = {m: (m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64)) for m in (ember, torch)}
    for step in range(4):
        x = rng.standard_normal((5, 3, 4)) * (step + 1) + step
        for m in (ember, torch):
            rm, rv = stats[m]
            F(m).batch_norm(m.tensor(x), rm, rv, training=True, momentum=0.2)
    for a, b in zip(stats[ember], stats[torch]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    # the running buffers are updated in place: the version moves
    v = stats[ember][0]._version
    F(ember).batch_norm(ember.tensor(x), *stats[ember], training=True)
    assert stats[ember][0]._version > v


NORM_ERRORS = [
    ("bn_eval_no_stats", lambda m, x: F(m).batch_norm(x, None, None), [(2, 3)]),
    ("bn_one_value", lambda m, x: F(m).batch_norm(x, None, None, training=True), [(1, 3)]),
    ("bn_stats_size", lambda m, x, r: F(m).batch_norm(x, r, r), [(2, 3), (4,)]),
    ("ln_shape", lambda m, x: F(m).layer_norm(x, [4]), [(2, 3)]),
    ("ln_weight", lambda m, x, w: F(m).layer_norm(x, [3], w), [(2, 3), (4,)]),
    ("gn_groups", lambda m, x: F(m).group_norm(x, 2), [(2, 3, 4)]),
    ("in_spatial", lambda m, x: F(m).instance_norm(x), [(2, 3, 1)]),
]


@pytest.mark.parametrize("name,fn,shapes", NORM_ERRORS, ids=[e[0] for e in NORM_ERRORS])
def test_norm_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


# ----- interpolate and pixel shuffle ----------------------------------------------------

def _interp(**kw):
    return lambda m, x: F(m).interpolate(x, **kw)


RESAMPLE = [
    Case("nearest_x2", _interp(scale_factor=2), [(2, 3, 4, 5)]),
    Case("nearest_x3", _interp(scale_factor=3), [(1, 2, 3, 2)]),
    Case("nearest_size", _interp(size=(7, 3)), [(2, 2, 4, 5)]),
    Case("nearest_frac", _interp(scale_factor=1.7), [(1, 2, 5, 4)]),
    Case("nearest_tuple", _interp(scale_factor=(0.5, 2.5)), [(1, 2, 6, 3)]),
    Case("nearest_1d", _interp(size=7), [(2, 3, 5)]),
    Case("nearest_3d", _interp(scale_factor=2), [(1, 2, 2, 3, 2)]),
    Case("nearest_exact", _interp(size=(7, 3), mode="nearest-exact"), [(1, 2, 4, 5)]),
    Case("linear", _interp(size=9, mode="linear"), [(2, 3, 5)]),
    Case("linear_ac", _interp(scale_factor=2, mode="linear", align_corners=True), [(2, 3, 5)]),
    Case("bilinear", _interp(scale_factor=2, mode="bilinear"), [(2, 2, 4, 5)]),
    Case("bilinear_ac", _interp(scale_factor=2, mode="bilinear", align_corners=True),
         [(2, 2, 4, 5)]),
    Case("bilinear_down", _interp(size=(3, 2), mode="bilinear"), [(1, 2, 7, 6)]),
    Case("bilinear_frac", _interp(scale_factor=1.5, mode="bilinear"), [(1, 2, 5, 4)]),
    Case("bilinear_recompute", _interp(scale_factor=1.5, mode="bilinear",
                                       recompute_scale_factor=True), [(1, 2, 5, 4)]),
    Case("bilinear_f32", _interp(size=(9, 7), mode="bilinear"), [(2, 2, 4, 5)],
         dtype=np.float32),
    Case("bilinear_sq", lambda m, x: F(m).interpolate(x, scale_factor=2, mode="bilinear") ** 2,
         [(1, 2, 3, 3)]),
    Case("bicubic", _interp(scale_factor=2, mode="bicubic"), [(1, 2, 4, 5)]),
    Case("bicubic_ac", _interp(size=(7, 3), mode="bicubic", align_corners=True),
         [(1, 2, 4, 5)]),
    Case("trilinear", _interp(scale_factor=2, mode="trilinear"), [(1, 2, 2, 3, 2)]),
    Case("area", _interp(size=(3, 2), mode="area"), [(2, 2, 7, 6)]),
    Case("pixel_shuffle", lambda m, x: F(m).pixel_shuffle(x, 2), [(2, 8, 3, 4)]),
    Case("pixel_shuffle_batchless", lambda m, x: F(m).pixel_shuffle(x, 3), [(9, 2, 2)]),
    Case("pixel_shuffle_5d", lambda m, x: F(m).pixel_shuffle(x, 2), [(2, 2, 4, 2, 3)]),
    Case("pixel_unshuffle", lambda m, x: F(m).pixel_unshuffle(x, 2), [(2, 3, 4, 6)]),
    Case("torch_pixel_shuffle", lambda m, x: m.pixel_shuffle(x, 2), [(1, 4, 2, 2)]),
]


@cases(RESAMPLE)
def test_resample(case):
    check(case)


RESAMPLE_ERRORS = [
    ("both", lambda m, x: F(m).interpolate(x, size=4, scale_factor=2), [(1, 1, 2, 2)]),
    ("neither", lambda m, x: F(m).interpolate(x), [(1, 1, 2, 2)]),
    ("ac_nearest", lambda m, x: F(m).interpolate(x, scale_factor=2, align_corners=True),
     [(1, 1, 2, 2)]),
    ("linear_4d", lambda m, x: F(m).interpolate(x, scale_factor=2, mode="linear"),
     [(1, 1, 2, 2)]),
    ("bad_mode", lambda m, x: F(m).interpolate(x, scale_factor=2, mode="cubic"),
     [(1, 1, 2, 2)]),
    ("size_len", lambda m, x: F(m).interpolate(x, size=(2, 3, 4)), [(1, 1, 2, 2)]),
    ("shuffle_channels", lambda m, x: F(m).pixel_shuffle(x, 2), [(1, 6, 2, 2)]),
    ("shuffle_dims", lambda m, x: F(m).pixel_shuffle(x, 2), [(4, 2)]),
    ("unshuffle_size", lambda m, x: F(m).pixel_unshuffle(x, 2), [(1, 1, 3, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", RESAMPLE_ERRORS, ids=[e[0] for e in RESAMPLE_ERRORS])
def test_resample_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


# ----- modules -------------------------------------------------------------------------

def _load(em, tm):
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})


def _run(em, tm, x, go_seed=1, tol=1e-10):
    """Forward + backward of both modules on ``x``; compares output and all gradients."""
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ye, yt = em(xe), tm(xt)
    if isinstance(yt, tuple):
        np.testing.assert_array_equal(ye[1].numpy(), yt[1].numpy())
        ye, yt = ye[0], yt[0]
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    go = np.random.default_rng(go_seed).standard_normal(tuple(yt.shape))
    ye.backward(ember.tensor(go))
    yt.backward(torch.tensor(go))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)
    tp = dict(tm.named_parameters())
    for name, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=tol, atol=tol,
                                   err_msg=name)
    eb, tb = dict(em.named_buffers()), dict(tm.named_buffers())
    assert eb.keys() == tb.keys()
    for k in eb:
        np.testing.assert_allclose(eb[k].numpy(), tb[k].numpy(), rtol=tol, atol=tol,
                                   err_msg=k)


MODULES = [
    ("MaxPool1d", lambda nn: nn.MaxPool1d(3, 2, 1), (2, 3, 9)),
    ("MaxPool2d", lambda nn: nn.MaxPool2d(2), (2, 3, 6, 5)),
    ("MaxPool2d_indices", lambda nn: nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True),
     (2, 3, 6, 5)),
    ("AvgPool1d", lambda nn: nn.AvgPool1d(3, 2, 1, count_include_pad=False), (2, 3, 9)),
    ("AvgPool2d", lambda nn: nn.AvgPool2d((2, 3), padding=1, ceil_mode=True), (2, 3, 6, 5)),
    ("AdaptiveAvgPool1d", lambda nn: nn.AdaptiveAvgPool1d(4), (2, 3, 9)),
    ("AdaptiveAvgPool2d", lambda nn: nn.AdaptiveAvgPool2d((3, None)), (2, 3, 7, 5)),
    ("AdaptiveMaxPool1d", lambda nn: nn.AdaptiveMaxPool1d(4), (2, 3, 9)),
    ("AdaptiveMaxPool2d", lambda nn: nn.AdaptiveMaxPool2d(3, return_indices=True),
     (2, 3, 7, 5)),
    ("LPPool2d", lambda nn: nn.LPPool2d(2, 2), (2, 3, 6, 4)),
    ("Upsample", lambda nn: nn.Upsample(scale_factor=2), (1, 2, 3, 4)),
    ("Upsample_bilinear", lambda nn: nn.Upsample(size=(5, 7), mode="bilinear"), (1, 2, 3, 4)),
    ("UpsamplingNearest2d", lambda nn: nn.UpsamplingNearest2d(scale_factor=3), (1, 2, 3, 2)),
    ("UpsamplingBilinear2d", lambda nn: nn.UpsamplingBilinear2d(size=(4, 6)), (1, 2, 3, 2)),
    ("PixelShuffle", lambda nn: nn.PixelShuffle(2), (1, 8, 2, 3)),
    ("PixelUnshuffle", lambda nn: nn.PixelUnshuffle(2), (1, 2, 4, 6)),
    ("LayerNorm", lambda nn: nn.LayerNorm((3, 4)), (2, 5, 3, 4)),
    ("LayerNorm_nobias", lambda nn: nn.LayerNorm(4, bias=False, eps=1e-3), (2, 5, 4)),
    ("LayerNorm_noaffine", lambda nn: nn.LayerNorm(4, elementwise_affine=False), (2, 4)),
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 6), (2, 6, 3, 3)),
    ("GroupNorm_noaffine", lambda nn: nn.GroupNorm(3, 3, affine=False), (2, 3, 5)),
    ("GroupNorm_nobias", lambda nn: nn.GroupNorm(1, 3, bias=False), (2, 3, 5)),
    ("InstanceNorm1d", lambda nn: nn.InstanceNorm1d(3), (2, 3, 6)),
    ("InstanceNorm2d_affine", lambda nn: nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 5)),
    ("InstanceNorm2d_unbatched", lambda nn: nn.InstanceNorm2d(3), (3, 4, 5)),
    ("InstanceNorm2d_stats", lambda nn: nn.InstanceNorm2d(3, track_running_stats=True),
     (2, 3, 4, 5)),
    ("LocalResponseNorm", lambda nn: nn.LocalResponseNorm(3), (2, 5, 3, 3)),
    ("RMSNorm", lambda nn: nn.RMSNorm(4), (2, 3, 4)),
    ("RMSNorm_noaffine", lambda nn: nn.RMSNorm([3, 4], eps=1e-3, elementwise_affine=False),
     (2, 3, 4)),
    ("ZeroPad2d", lambda nn: nn.ZeroPad2d((1, 2, 0, 3)), (1, 2, 3, 3)),
    ("ConstantPad1d", lambda nn: nn.ConstantPad1d(2, 3.5), (2, 3, 4)),
    ("ConstantPad3d", lambda nn: nn.ConstantPad3d((1, 0, 0, 1, 2, 0), -1.0), (1, 1, 2, 2, 2)),
    ("ReflectionPad1d", lambda nn: nn.ReflectionPad1d((2, 1)), (2, 3, 4)),
    ("ReflectionPad2d", lambda nn: nn.ReflectionPad2d(1), (1, 2, 3, 4)),
    ("ReplicationPad2d", lambda nn: nn.ReplicationPad2d((1, 0, 2, 1)), (1, 2, 3, 4)),
    ("ReplicationPad3d", lambda nn: nn.ReplicationPad3d(1), (1, 1, 2, 2, 2)),
    ("CircularPad2d", lambda nn: nn.CircularPad2d(1), (1, 2, 3, 4)),
]


@pytest.mark.parametrize("name,make,shape", MODULES, ids=[m[0] for m in MODULES])
def test_module(name, make, shape):
    tm = make(torch.nn).double()
    em = make(ember.nn).double()
    assert repr(em) == repr(tm)
    _load(em, tm)
    x = np.random.default_rng(0).standard_normal(shape)
    _run(em, tm, x)


BN = [
    ("BatchNorm1d", lambda nn: nn.BatchNorm1d(4), (6, 4)),
    ("BatchNorm1d_3d", lambda nn: nn.BatchNorm1d(4, momentum=0.3), (3, 4, 5)),
    ("BatchNorm2d", lambda nn: nn.BatchNorm2d(3), (4, 3, 3, 2)),
    ("BatchNorm2d_cumulative", lambda nn: nn.BatchNorm2d(3, momentum=None), (4, 3, 3, 2)),
    ("BatchNorm2d_noaffine", lambda nn: nn.BatchNorm2d(3, affine=False, eps=1e-3),
     (4, 3, 3, 2)),
    ("BatchNorm2d_notrack", lambda nn: nn.BatchNorm2d(3, track_running_stats=False),
     (4, 3, 3, 2)),
    ("BatchNorm3d", lambda nn: nn.BatchNorm3d(2), (2, 2, 3, 2, 2)),
    ("BatchNorm2d_nobias", lambda nn: nn.BatchNorm2d(3, bias=False), (4, 3, 3, 2)),
]


@pytest.mark.parametrize("name,make,shape", BN, ids=[m[0] for m in BN])
def test_batch_norm_module(name, make, shape):
    """Several training steps (running statistics), then eval mode."""
    tm = make(torch.nn).double()
    em = make(ember.nn).double()
    assert repr(em) == repr(tm)
    assert list(em.state_dict()) == list(tm.state_dict())
    rng = np.random.default_rng(0)
    with torch.no_grad():
        if tm.weight is not None:
            tm.weight.copy_(torch.tensor(rng.uniform(0.5, 1.5, tm.weight.shape)))
        if tm.bias is not None:
            tm.bias.copy_(torch.tensor(rng.standard_normal(tm.bias.shape)))
    _load(em, tm)
    for step in range(3):
        x = rng.standard_normal(shape) * (1 + step) + step
        _run(em, tm, x, go_seed=step)
        for p in list(em.parameters()) + list(tm.parameters()):
            p.grad = None
    if tm.num_batches_tracked is not None:
        assert int(em.num_batches_tracked) == int(tm.num_batches_tracked) == 3
    em.eval()
    tm.eval()
    _run(em, tm, rng.standard_normal(shape))


def test_batch_norm_state_dict_roundtrip():
    em = ember.nn.BatchNorm2d(3)
    em(ember.randn(4, 3, 2, 2))
    sd = em.state_dict()
    assert list(sd) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    other = ember.nn.BatchNorm2d(3)
    other.load_state_dict(sd)
    np.testing.assert_array_equal(other.running_var.numpy(), em.running_var.numpy())
    legacy = {k: v for k, v in sd.items() if k != "num_batches_tracked"}
    other.load_state_dict(legacy)  # checkpoints from before num_batches_tracked


def test_batch_norm_double_backward_module():
    """A gradient penalty through BatchNorm2d in training mode."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 3, 3))
    w = rng.standard_normal((2, 3, 2, 2))
    res = {}
    for m in (ember, torch):
        bn = m.nn.BatchNorm2d(3).double()
        xi = m.tensor(x, requires_grad=True)
        wi = m.tensor(w, requires_grad=True)
        out = F(m).conv2d(m.tanh(bn(xi)), wi).pow(2).sum()
        g, = m.autograd.grad(out, xi, create_graph=True)
        (g ** 2).sum().backward()
        res[m.__name__] = [wi.grad.numpy(), bn.weight.grad.numpy(), bn.bias.grad.numpy()]
    for a, b in zip(res["ember"], res["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


MODULE_ERRORS = [
    (lambda nn: nn.BatchNorm2d(3), (3, 3), ValueError),
    (lambda nn: nn.BatchNorm1d(3), (2, 3, 4, 4), ValueError),
    (lambda nn: nn.InstanceNorm2d(3, affine=True), (2, 4, 3, 3), ValueError),
    (lambda nn: nn.InstanceNorm1d(3), (2, 3, 4, 4), ValueError),
    (lambda nn: nn.LayerNorm(4), (2, 3), RuntimeError),
    (lambda nn: nn.MaxPool2d(2), (4,), RuntimeError),
    (lambda nn: nn.CircularPad2d(1), (4, 4), ValueError),
]


@pytest.mark.parametrize("make,shape,exc", MODULE_ERRORS)
def test_module_input_errors(make, shape, exc):
    with pytest.raises(exc):
        make(torch.nn)(torch.zeros(shape))
    with pytest.raises(exc):
        make(ember.nn)(ember.zeros(shape))


def test_group_norm_constructor_error():
    with pytest.raises(ValueError):
        torch.nn.GroupNorm(4, 6)
    with pytest.raises(ValueError):
        ember.nn.GroupNorm(4, 6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 700.0])
@pytest.mark.parametrize("eps", [None, 0.5])
@pytest.mark.parametrize("weighted", [True, False])
def test_rms_norm_reduced_precision_computed_in_float32(dtype, scale, eps, weighted):
    """float16/bfloat16 rms_norm computes in float32 and rounds once, as PyTorch's
    composite (its graph: ToCopy, pow, mean, add, rsqrt, mul(s), ToCopy back), with
    float32's epsilon as the default: torch's bits, forward and backward. In float16 the
    squares of values above 256 overflowed and the result was all zeros."""
    rng = np.random.default_rng(int(scale * 10) + weighted)
    tdt, edt = getattr(torch, dtype), getattr(ember, dtype)
    x = torch.tensor(rng.standard_normal((3, 5)) * scale, dtype=tdt, requires_grad=True)
    w = torch.tensor(rng.standard_normal(5), dtype=tdt, requires_grad=True)
    xe = ember.tensor(x.detach().float().numpy()).to(edt).requires_grad_()
    we = ember.tensor(w.detach().float().numpy()).to(edt).requires_grad_()
    t = torch.nn.functional.rms_norm(x, (5,), w if weighted else None, eps=eps)
    e = ember.nn.functional.rms_norm(xe, (5,), we if weighted else None, eps=eps)
    assert e.dtype == edt and type(e.grad_fn).__name__ == type(t.grad_fn).__name__
    np.testing.assert_array_equal(e.detach().float().numpy(), t.detach().float().numpy())
    g = rng.standard_normal((3, 5))
    t.backward(torch.tensor(g, dtype=tdt))
    e.backward(ember.tensor(g.astype(np.float32)).to(edt))
    pairs = [(xe, x)] + ([(we, w)] if weighted else [])
    for a, b in pairs:
        np.testing.assert_array_equal(a.grad.float().numpy(), b.grad.float().numpy())
