"""AdaptiveLogSoftmaxWithLoss, CrossMapLRN2d, Container, factory_kwargs, the
functional constants and aliases, and nn.utils fusion/memory-format/skip_init, against
torch."""
import numpy as np
import pytest
import torch

import ember


def _copy_params(src, dst):
    """Load torch module ``src``'s state into ember module ``dst``."""
    dst.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in
                         src.state_dict().items()})


def _close(e, t, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("head_bias", [False, True])
def test_adaptive_log_softmax(head_bias):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 16))
    y = np.array([0, 3, 5, 9, 12, 19, 2])
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0,
                                            head_bias=head_bias).double()
    e = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0,
                                            head_bias=head_bias).double()
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    _copy_params(t, e)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    to, eo = t(tx, torch.tensor(y)), e(ex, ember.tensor(y))
    _close(eo.output, to.output, 1e-10, 1e-12)
    _close(eo.loss, to.loss, 1e-10, 1e-12)
    to.loss.backward()
    eo.loss.backward()
    _close(ex.grad, tx.grad, 1e-9, 1e-12)
    for (_, ep), (_, tp) in zip(e.named_parameters(), t.named_parameters()):
        _close(ep.grad, tp.grad, 1e-9, 1e-12)
    _close(e.log_prob(ex), t.log_prob(tx), 1e-10, 1e-12)
    assert e.predict(ex).tolist() == t.predict(tx).tolist()
    # unbatched
    _close(e(ex[0], ember.tensor(y[3])).output, t(tx[0], torch.tensor(y[3])).output, 1e-10)
    # torch's log_prob of an unbatched input fails (log_softmax over dim 1 of a 1-D
    # tensor); ember's is the batched row
    _close(e.log_prob(ex[1]), t.log_prob(tx[1:2])[0], 1e-10, 1e-12)
    with pytest.raises(RuntimeError, match="Target values should be in"):
        e(ex, ember.tensor([0, 1, 2, 3, 4, 5, 20]))
    with pytest.raises(ValueError, match="cutoffs"):
        ember.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [10, 4])


@pytest.mark.parametrize("size", [3, 4, 5])
def test_cross_map_lrn2d(size):
    x = np.random.default_rng(size).standard_normal((2, 6, 3, 4))
    t = torch.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.6, k=1.5)
    e = ember.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.6, k=1.5)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    ty, ey = t(tx), e(ex)
    _close(ey, ty, 1e-10, 1e-12)
    assert repr(e) == repr(t)


def test_container_and_factory_kwargs():
    with pytest.warns(UserWarning, match="deprecated"):
        c = ember.nn.Container(a=ember.nn.Linear(2, 3))
    assert [n for n, _ in c.named_parameters()] == ["a.weight", "a.bias"]
    kw = {"device": "cpu", "factory_kwargs": {"dtype": ember.float64}}
    assert ember.nn.factory_kwargs(kw) == {"device": "cpu", "dtype": ember.float64}
    assert ember.nn.factory_kwargs(None) == torch.nn.factory_kwargs(None) == {}
    for bad in ({"foo": 1}, {"dtype": 1, "factory_kwargs": {"dtype": 2}}):
        with pytest.raises(TypeError):
            torch.nn.factory_kwargs(bad)
        with pytest.raises(TypeError):
            ember.nn.factory_kwargs(bad)
    assert ember.nn.UninitializedParameter is ember.nn.parameter.UninitializedParameter


def test_functional_constants_and_aliases():
    F, TF = ember.nn.functional, torch.nn.functional
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == TF.GRID_SAMPLE_INTERPOLATION_MODES
    assert F.GRID_SAMPLE_PADDING_MODES == TF.GRID_SAMPLE_PADDING_MODES
    F.assert_int_or_pair(3, "k", "{} bad")
    F.assert_int_or_pair((1, 2), "k", "{} bad")
    with pytest.raises(AssertionError, match="k bad"):
        F.assert_int_or_pair((1, 2, 3), "k", "{} bad")
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((5, 2, 3)), rng.standard_normal((3, 3, 4)), \
        rng.standard_normal(4)
    _close(F.conv_tbc(ember.tensor(x), ember.tensor(w), ember.tensor(b), 1),
           TF.conv_tbc(torch.tensor(x), torch.tensor(w), torch.tensor(b), 1), 1e-12)
    y = rng.standard_normal((2, 4, 3))
    _close(F.native_channel_shuffle(ember.tensor(y), 2),
           TF.native_channel_shuffle(torch.tensor(y), 2))


@pytest.mark.parametrize("transpose", [False, True])
def test_fuse_conv_bn(transpose):
    torch.manual_seed(0)
    conv_cls = torch.nn.ConvTranspose2d if transpose else torch.nn.Conv2d
    tc, tb = conv_cls(3, 4, 3).double().eval(), torch.nn.BatchNorm2d(4).double().eval()
    tb.running_mean.uniform_(-1, 1)
    tb.running_var.uniform_(0.5, 2)
    tb.weight.data.uniform_(0.5, 2)
    tb.bias.data.uniform_(-1, 1)
    econv_cls = ember.nn.ConvTranspose2d if transpose else ember.nn.Conv2d
    ec, eb = econv_cls(3, 4, 3).double().eval(), ember.nn.BatchNorm2d(4).double().eval()
    _copy_params(tc, ec)
    _copy_params(tb, eb)
    tf = torch.nn.utils.fuse_conv_bn_eval(tc, tb, transpose)
    ef = ember.nn.utils.fuse_conv_bn_eval(ec, eb, transpose)
    _close(ef.weight, tf.weight, 1e-12)
    _close(ef.bias, tf.bias, 1e-12)
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 5))
    _close(ef(ember.tensor(x)), eb(ec(ember.tensor(x))), 1e-10, 1e-12)
    assert isinstance(ef.weight, ember.nn.Parameter)
    ec.train()
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        ember.nn.utils.fuse_conv_bn_eval(ec, eb)


def test_fuse_linear_bn():
    tl, tb = torch.nn.Linear(3, 4).double().eval(), torch.nn.BatchNorm1d(4).double().eval()
    tb.running_mean.uniform_(-1, 1)
    tb.running_var.uniform_(0.5, 2)
    el, eb = ember.nn.Linear(3, 4).double().eval(), ember.nn.BatchNorm1d(4).double().eval()
    _copy_params(tl, el)
    _copy_params(tb, eb)
    tf, ef = torch.nn.utils.fuse_linear_bn_eval(tl, tb), ember.nn.utils.fuse_linear_bn_eval(el,
                                                                                             eb)
    _close(ef.weight, tf.weight, 1e-12)
    _close(ef.bias, tf.bias, 1e-12)
    w, b = ember.nn.utils.fuse_linear_bn_weights(el.weight, None, eb.running_mean,
                                                  eb.running_var, 1e-5, eb.weight, eb.bias)
    tw, tb2 = torch.nn.utils.fuse_linear_bn_weights(tl.weight, None, tb.running_mean,
                                                    tb.running_var, 1e-5, tb.weight, tb.bias)
    _close(w, tw, 1e-12)
    _close(b, tb2, 1e-12)


def test_convert_weight_memory_format_and_skip_init():
    m = ember.nn.Sequential(ember.nn.Conv2d(2, 3, 3), ember.nn.ReLU(),
                            ember.nn.Sequential(ember.nn.ConvTranspose2d(3, 2, 2)))
    t = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU(),
                            torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 2, 2)))
    before = m[0].weight.detach().clone()
    assert ember.nn.utils.convert_conv2d_weight_memory_format(m, ember.channels_last) is m
    torch.nn.utils.convert_conv2d_weight_memory_format(t, torch.channels_last)
    assert m[0].weight.stride() == t[0].weight.stride()
    assert m[2][0].weight.stride() == t[2][0].weight.stride()
    assert ember.equal(m[0].weight, before)
    c3 = ember.nn.Conv3d(2, 2, 2)
    ember.nn.utils.convert_conv3d_weight_memory_format(c3, ember.channels_last_3d)
    assert c3.weight.stride() == torch.nn.Conv3d(2, 2, 2).weight.contiguous(
        memory_format=torch.channels_last_3d).stride()
    ember.manual_seed(0)
    torch.manual_seed(0)
    lin = ember.nn.utils.skip_init(ember.nn.Linear, 4, 5)
    torch.nn.utils.skip_init(torch.nn.Linear, 4, 5)
    assert tuple(lin.weight.shape) == (5, 4)
    # the random stream is untouched, as in torch
    assert ember.rand(3).tolist() == pytest.approx(torch.rand(3).tolist())
    with pytest.raises(RuntimeError, match="device"):
        ember.nn.utils.skip_init(ember.nn.ReLU)
