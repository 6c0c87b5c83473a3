"""Convolutions (functional and modules), unfold/fold, against torch: values, gradients,
second gradients (gradient penalties), errors, module state and repr."""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check, check_raises

import ember
import ember.nn  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


def F(m):
    return m.nn.functional


def _conv(dim, **kw):
    def fn(m, x, w, b=None):
        return getattr(F(m), f"conv{dim}d")(x, w, b, **kw)
    return fn


def _convt(dim, **kw):
    def fn(m, x, w, b=None):
        return getattr(F(m), f"conv_transpose{dim}d")(x, w, b, **kw)
    return fn


CONV = [
    # conv1d
    Case("conv1d", _conv(1), [(2, 3, 9), (4, 3, 3), (4,)]),
    Case("conv1d_stride_pad", _conv(1, stride=2, padding=1), [(2, 3, 10), (4, 3, 3), (4,)]),
    Case("conv1d_dilation", _conv(1, dilation=2, padding=2), [(2, 2, 9), (3, 2, 3)]),
    Case("conv1d_groups", _conv(1, groups=3), [(2, 6, 7), (9, 2, 2), (9,)]),
    Case("conv1d_same_even", _conv(1, padding="same"), [(2, 3, 8), (2, 3, 4)]),
    Case("conv1d_valid", _conv(1, padding="valid"), [(1, 2, 6), (2, 2, 3)]),
    Case("conv1d_unbatched", _conv(1, padding=1), [(3, 7), (2, 3, 3), (2,)]),
    # conv2d
    Case("conv2d", _conv(2), [(2, 3, 7, 6), (4, 3, 3, 3), (4,)]),
    Case("conv2d_nobias", _conv(2), [(2, 3, 6, 6), (5, 3, 2, 2)]),
    Case("conv2d_stride2", _conv(2, stride=2), [(2, 3, 9, 8), (4, 3, 3, 3), (4,)]),
    Case("conv2d_stride_tuple", _conv(2, stride=(2, 1), padding=(1, 2)),
         [(2, 2, 7, 5), (3, 2, 3, 2), (3,)]),
    Case("conv2d_dilation", _conv(2, dilation=(2, 1), padding=1), [(1, 2, 8, 7), (3, 2, 3, 3)]),
    Case("conv2d_groups2", _conv(2, groups=2, padding=1), [(2, 4, 5, 5), (6, 2, 3, 3), (6,)]),
    Case("conv2d_depthwise", _conv(2, groups=4, stride=2, padding=1),
         [(2, 4, 7, 7), (8, 1, 3, 3), (8,)]),
    Case("conv2d_depthwise_m1", _conv(2, groups=3, padding=(2, 1), dilation=(2, 1)),
         [(2, 3, 6, 5), (3, 1, 3, 2), (3,)]),
    Case("conv1d_depthwise", _conv(1, groups=2, stride=2), [(2, 2, 9), (6, 1, 3), (6,)]),
    Case("conv3d_depthwise", _conv(3, groups=2, padding=1), [(1, 2, 3, 4, 3), (2, 1, 2, 2, 2)]),
    Case("conv2d_same_odd", _conv(2, padding="same"), [(2, 3, 6, 5), (2, 3, 3, 3), (2,)]),
    Case("conv2d_same_even_dil", _conv(2, padding="same", dilation=(1, 2)),
         [(1, 2, 6, 7), (3, 2, 4, 2)]),
    Case("conv2d_1x1", _conv(2), [(3, 5, 4, 4), (2, 5, 1, 1), (2,)]),
    Case("conv2d_full_kernel", _conv(2), [(2, 3, 4, 5), (2, 3, 4, 5), (2,)]),
    Case("conv2d_odd_all", _conv(2, stride=(3, 2), padding=(2, 1), dilation=(1, 2), groups=3),
         [(2, 3, 11, 9), (6, 1, 2, 3), (6,)]),
    Case("conv2d_unbatched", _conv(2, padding=1), [(3, 5, 5), (2, 3, 3, 3), (2,)]),
    Case("conv2d_empty_batch", _conv(2), [(0, 3, 5, 5), (2, 3, 3, 3), (2,)], gradgrad=False),
    Case("conv2d_f32", _conv(2, padding=1), [(2, 3, 6, 6), (4, 3, 3, 3), (4,)],
         dtype=np.float32, rtol=1e-4, atol=1e-4),
    Case("conv2d_tanh_conv", lambda m, x, w1, w2: F(m).conv2d(m.tanh(F(m).conv2d(x, w1)), w2),
         [(2, 2, 7, 7), (3, 2, 3, 3), (2, 3, 3, 3)]),
    # conv3d
    Case("conv3d", _conv(3, padding=1), [(1, 2, 4, 5, 4), (3, 2, 3, 3, 2), (3,)]),
    Case("conv3d_stride", _conv(3, stride=(1, 2, 2), dilation=(2, 1, 1)),
         [(2, 2, 6, 5, 5), (2, 2, 2, 3, 2)]),
    # transposed
    Case("conv_t1d", _convt(1), [(2, 3, 6), (3, 2, 3), (2,)]),
    Case("conv_t1d_stride", _convt(1, stride=3, padding=1, output_padding=2),
         [(2, 3, 5), (3, 4, 4), (4,)]),
    Case("conv_t2d", _convt(2), [(2, 3, 4, 5), (3, 2, 3, 3), (2,)]),
    Case("conv_t2d_stride2", _convt(2, stride=2, padding=1, output_padding=1),
         [(2, 4, 4, 3), (4, 3, 3, 3), (3,)]),
    Case("conv_t2d_groups_dil", _convt(2, stride=(2, 3), groups=2, dilation=(2, 1),
                                       output_padding=(1, 2)),
         [(2, 4, 3, 4), (4, 3, 2, 3), (6,)]),
    Case("conv_t2d_op_lt_dilation", _convt(2, dilation=2, output_padding=1),
         [(1, 2, 3, 3), (2, 2, 3, 3)]),
    Case("conv_t2d_depthwise", _convt(2, stride=2, groups=3, padding=1, output_padding=1),
         [(2, 3, 4, 3), (3, 1, 3, 3), (3,)]),
    Case("conv_t2d_unbatched", _convt(2, stride=2), [(3, 3, 3), (3, 2, 2, 2), (2,)]),
    Case("conv_t3d", _convt(3, stride=2, padding=1), [(1, 2, 3, 3, 2), (2, 2, 3, 3, 3), (2,)]),
    Case("conv_t2d_f32", _convt(2, stride=2), [(2, 3, 4, 4), (3, 2, 3, 3), (2,)],
         dtype=np.float32, rtol=1e-4, atol=1e-4),
    # unfold / fold
    Case("unfold", lambda m, x: F(m).unfold(x, (2, 3)), [(2, 3, 5, 6)]),
    Case("unfold_args", lambda m, x: F(m).unfold(x, 3, dilation=(1, 2), padding=1, stride=2),
         [(2, 2, 7, 8)]),
    Case("unfold_unbatched", lambda m, x: F(m).unfold(x, 2, stride=2), [(3, 4, 4)]),
    Case("fold", lambda m, x: F(m).fold(x, (4, 5), (2, 3)), [(2, 12, 9)]),
    Case("fold_args", lambda m, x: F(m).fold(x, (6, 5), 3, padding=1, stride=(2, 1),
                                             dilation=(1, 2)), [(1, 18, 9)]),
    Case("unfold_square", lambda m, x: F(m).unfold(x, 2, stride=1) ** 2, [(1, 2, 4, 4)]),
]


@cases(CONV)
def test_conv(case):
    check(case)


def test_integer_conv():
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 5, (2, 3, 6, 6))
    w = rng.integers(-3, 3, (4, 3, 3, 3))
    e = ember.nn.functional.conv2d(ember.tensor(x), ember.tensor(w), stride=2)
    t = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=2)
    assert e.dtype == ember.int64
    np.testing.assert_array_equal(e.numpy(), t.numpy())


ERRORS = [
    ("input_dims", lambda m, x, w: F(m).conv2d(x[0, 0], w), [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("channels", lambda m, x, w: F(m).conv2d(x, w), [(2, 3, 5, 5), (4, 2, 3, 3)]),
    ("stride0", lambda m, x, w: F(m).conv2d(x, w, stride=0), [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("neg_pad", lambda m, x, w: F(m).conv2d(x, w, padding=-1), [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("pad_str", lambda m, x, w: F(m).conv2d(x, w, padding="full"), [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("same_strided", lambda m, x, w: F(m).conv2d(x, w, padding="same", stride=2),
     [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("dilation0", lambda m, x, w: F(m).conv2d(x, w, dilation=0), [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("groups_channels", lambda m, x, w: F(m).conv2d(x, w, groups=2),
     [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("groups0", lambda m, x, w: F(m).conv2d(x, w, groups=0), [(2, 3, 5, 5), (3, 3, 3, 3)]),
    ("kernel_too_big", lambda m, x, w: F(m).conv2d(x, w), [(2, 3, 5, 5), (4, 3, 7, 7)]),
    ("bias_shape", lambda m, x, w, b: F(m).conv2d(x, w, b),
     [(2, 3, 5, 5), (4, 3, 3, 3), (3,)]),
    ("stride_len", lambda m, x, w: F(m).conv2d(x, w, stride=(1, 1, 1)),
     [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("dtype_mismatch", lambda m, x, w: F(m).conv2d(x, w.float()), [(2, 3, 5, 5), (4, 3, 3, 3)]),
    ("convt_channels", lambda m, x, w: F(m).conv_transpose2d(x, w),
     [(2, 3, 5, 5), (4, 2, 3, 3)]),
    ("convt_output_padding", lambda m, x, w: F(m).conv_transpose2d(x, w, output_padding=1),
     [(2, 3, 5, 5), (3, 2, 3, 3)]),
    ("conv1d_on_4d", lambda m, x, w: F(m).conv1d(x, w), [(2, 3, 5, 5), (4, 3, 3)]),
    ("unfold_too_small", lambda m, x: F(m).unfold(x, 5), [(1, 2, 3, 3)]),
    ("fold_blocks", lambda m, x: F(m).fold(x, (4, 5), (2, 3)), [(2, 12, 7)]),
    ("fold_divisible", lambda m, x: F(m).fold(x, (4, 5), (2, 3)), [(2, 11, 6)]),
]


@pytest.mark.parametrize("name,fn,shapes", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


# ----- gradient penalty through conv layers ------------------------------------------

def _critic(m, x, ws):
    w1, b1, w2, b2, w3 = ws
    h = F(m).leaky_relu(F(m).conv2d(x, w1, b1, stride=2, padding=1), 0.2)
    h = F(m).leaky_relu(F(m).conv2d(h, w2, b2, padding=1, groups=2), 0.2)
    h = F(m).max_pool2d(h, 2)
    return (h.flatten(1) @ w3).sum(1)


def test_wgan_gp_gradient_penalty():
    """The gradient of ||d critic / d input|| with respect to the conv weights."""
    rng = np.random.default_rng(3)
    shapes = [(4, 2, 3, 3), (4,), (6, 2, 3, 3), (6,), (6 * 2 * 2, 1)]
    arrays = [rng.standard_normal(s) * 0.5 for s in shapes]
    x = rng.standard_normal((3, 2, 8, 8))
    res = {}
    for m in (ember, torch):
        ws = [m.tensor(a, requires_grad=True) for a in arrays]
        xi = m.tensor(x, requires_grad=True)
        out = _critic(m, xi, ws)
        g, = m.autograd.grad(out.sum(), xi, create_graph=True)
        gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
        gp.backward()
        # leaky_relu's derivative is piecewise constant: torch leaves zero gradients on the
        # biases, ember none at all
        res[m.__name__] = [gp.detach().numpy()] + [
            w.grad.numpy() if w.grad is not None else np.zeros(w.shape) for w in ws]
    assert np.abs(res["torch"][1]).max() > 1e-3 and np.abs(res["torch"][3]).max() > 1e-3
    for a, b in zip(res["ember"], res["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


# ----- modules ---------------------------------------------------------------------------

def _load(em, tm):
    """Copy torch module ``tm``'s parameters and buffers into ember module ``em``."""
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})


def _compare_module(em, tm, x, rtol=1e-5, atol=1e-6, **call):
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ye, yt = em(xe, **call), tm(xt, **call)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=atol)
    go = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(x.dtype)
    ye.backward(ember.tensor(go))
    yt.backward(torch.tensor(go))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=atol)
    tp = dict(tm.named_parameters())
    for name, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


MODULES = [
    ("Conv1d", lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    ("Conv2d", lambda nn: nn.Conv2d(3, 6, 3, padding=1, groups=3), (2, 3, 6, 6)),
    ("Conv2d_nobias", lambda nn: nn.Conv2d(2, 4, (3, 2), stride=(2, 1), dilation=2,
                                           bias=False), (2, 2, 9, 7)),
    ("Conv2d_same", lambda nn: nn.Conv2d(2, 3, 4, padding="same"), (1, 2, 7, 6)),
    ("Conv2d_reflect", lambda nn: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"),
     (2, 2, 5, 6)),
    ("Conv2d_replicate", lambda nn: nn.Conv2d(2, 3, 3, padding=1, padding_mode="replicate"),
     (2, 2, 5, 6)),
    ("Conv2d_circular", lambda nn: nn.Conv2d(2, 3, 3, padding=2, padding_mode="circular"),
     (2, 2, 5, 6)),
    ("Conv2d_same_reflect", lambda nn: nn.Conv2d(2, 3, 4, padding="same",
                                                 padding_mode="reflect"), (1, 2, 7, 6)),
    ("Conv3d", lambda nn: nn.Conv3d(2, 3, 2, padding=1), (1, 2, 3, 4, 3)),
    ("ConvTranspose1d", lambda nn: nn.ConvTranspose1d(3, 2, 3, stride=2), (2, 3, 5)),
    ("ConvTranspose2d", lambda nn: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                      output_padding=1, groups=2), (2, 4, 4, 5)),
]


@pytest.mark.parametrize("name,make,shape", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch(name, make, shape):
    tm = make(torch.nn).double()
    em = make(ember.nn).double()
    assert repr(em) == repr(tm)
    assert [(k, tuple(v.shape)) for k, v in em.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    _load(em, tm)
    x = np.random.default_rng(0).standard_normal(shape)
    _compare_module(em, tm, x, rtol=1e-10, atol=1e-12)


def test_conv_transpose_output_size():
    tm = torch.nn.ConvTranspose2d(2, 3, 3, stride=2).double()
    em = ember.nn.ConvTranspose2d(2, 3, 3, stride=2).double()
    _load(em, tm)
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4))
    for size in [(9, 9), (10, 10), (9, 10), (1, 3, 10, 9)]:
        _compare_module(em, tm, x, rtol=1e-10, atol=1e-12, output_size=size)
    with pytest.raises(ValueError):
        em(ember.tensor(x), output_size=(11, 11))
    with pytest.raises(ValueError):
        tm(torch.tensor(x), output_size=(11, 11))


def test_conv_float32_module():
    tm = torch.nn.Conv2d(3, 8, 3, padding=1)
    em = ember.nn.Conv2d(3, 8, 3, padding=1)
    assert em.weight.dtype == ember.float32
    _load(em, tm)
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    _compare_module(em, tm, x, rtol=1e-4, atol=1e-5)


def test_conv_default_init():
    """kaiming_uniform_(a=sqrt(5)) weights: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); same for bias."""
    m = ember.nn.Conv2d(4, 64, 3, groups=2)
    fan_in = 2 * 3 * 3
    bound = 1 / np.sqrt(fan_in)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert w.shape == (64, 2, 3, 3) and b.shape == (64,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.8 * bound and w.std() > 0.4 * bound
    assert m.weight.requires_grad and m.weight.grad_fn is None
    t = ember.nn.ConvTranspose2d(4, 6, 3)
    assert tuple(t.weight.shape) == (4, 6, 3, 3)


REPRS = [
    lambda nn: nn.Conv2d(3, 8, 3),
    lambda nn: nn.Conv2d(3, 8, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1),
                         groups=1, bias=False, padding_mode="circular"),
    lambda nn: nn.Conv1d(4, 4, 3, padding="same", groups=4),
    lambda nn: nn.Conv2d(4, 4, 3, padding="valid"),
    lambda nn: nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1, dilation=2),
    lambda nn: nn.ConvTranspose1d(4, 2, 3),
    lambda nn: nn.Fold((4, 5), 2),
    lambda nn: nn.Unfold(3, padding=1),
]


@pytest.mark.parametrize("make", REPRS)
def test_repr(make):
    assert repr(make(ember.nn)) == repr(make(torch.nn))


MODULE_ERRORS = [
    lambda nn: nn.Conv2d(3, 4, 3, groups=2),
    lambda nn: nn.Conv2d(4, 3, 3, groups=2),
    lambda nn: nn.Conv2d(4, 4, 3, groups=0),
    lambda nn: nn.Conv2d(4, 4, 3, padding="full"),
    lambda nn: nn.Conv2d(4, 4, 3, padding="same", stride=2),
    lambda nn: nn.Conv2d(4, 4, 3, padding_mode="mirror"),
    lambda nn: nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect"),
]


@pytest.mark.parametrize("make", MODULE_ERRORS)
def test_module_errors(make):
    with pytest.raises(ValueError):
        make(torch.nn)
    with pytest.raises(ValueError):
        make(ember.nn)


def test_module_input_error():
    em, tm = ember.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 3)
    for shape in [(2, 3, 5), (2, 3), (2, 4, 5, 5)]:
        with pytest.raises(RuntimeError):
            tm(torch.zeros(shape))
        with pytest.raises(RuntimeError):
            em(ember.zeros(shape))
