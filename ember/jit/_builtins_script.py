"""Builtins that ``jit.script``'s templates call and jit-load's table lacks (additive rows
of :data:`ember.jit._builtins.TABLE`): the single-step RNN cells."""
from ember.jit._builtins import TABLE


def _F():
    import ember.nn.functional as F
    return F


def _rnn_cell(act):
    def cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        F = _F()
        return act(F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh))
    return cell


def _lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    F = _F()
    h, c = hx
    gates = F.linear(input, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, 1)
    c1 = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c1.tanh(), c1


def _gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    F = _F()
    gi = F.linear(input, w_ih, b_ih).chunk(3, 1)
    gh = F.linear(hx, w_hh, b_hh).chunk(3, 1)
    r = (gi[0] + gh[0]).sigmoid()
    z = (gi[1] + gh[1]).sigmoid()
    n = (gi[2] + r * gh[2]).tanh()
    return (1 - z) * n + z * hx


for _name, _fn in (("torch.rnn_tanh_cell", _rnn_cell(lambda t: t.tanh())),
                   ("torch.rnn_relu_cell", _rnn_cell(lambda t: t.relu())),
                   ("torch.lstm_cell", _lstm_cell), ("torch.gru_cell", _gru_cell)):
    TABLE.setdefault(_name, _fn)


def _set_item(container, key, value):
    container[key] = value
    return container


def _index(x, indices):
    if len(indices) != 1 or indices[0] is None:
        raise NotImplementedError("aten::index with other than one tensor index at dim 0 "
                                  "is not supported by ember's TorchScript interpreter")
    return x[indices[0]]


for _name, _fn in (("torch._set_item", _set_item), ("torch.clear", lambda c: c.clear()),
                   ("torch.numpy_T", lambda x: x.T), ("torch.index", _index)):
    TABLE.setdefault(_name, _fn)


def _segment_reduce(data, reduce, lengths=None, indices=None, offsets=None, axis=0,
                    unsafe=False, initial=None):
    from ember._runtime_api import segment_reduce
    return segment_reduce(data, reduce, lengths=lengths, indices=indices, offsets=offsets,
                          axis=axis, unsafe=unsafe, initial=initial)


def _reduction(r):
    return {0: "none", 1: "mean", 2: "sum"}.get(r, r) if isinstance(r, int) else r


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    if scale != 1.0 or input_scale != 1.0:
        raise NotImplementedError("aten::elu with scale/input_scale other than 1 is not "
                                  "supported by ember's TorchScript interpreter")
    return _F().elu(x, alpha)


def _math(name):
    """A Python-number overload (``aten::gcd.int``) beside the tensor op of that name."""
    import math

    def op(*args):
        from ember._tensor import Tensor
        if any(isinstance(a, Tensor) for a in args):
            import ember
            return getattr(ember, name)(*args)
        return getattr(math, name)(*args)
    return op


# activations and losses by their aten schemas (positional, as TorchScript calls them)
for _name, _fn in (
        ("torch.silu", lambda x: _F().silu(x)),
        ("torch.leaky_relu", lambda x, slope=0.01: _F().leaky_relu(x, slope)),
        ("torch.hardtanh", lambda x, lo=-1.0, hi=1.0: _F().hardtanh(x, lo, hi)),
        ("torch.elu", _elu),
        ("torch.selu", lambda x: _F().selu(x)),
        ("torch.celu", lambda x, alpha=1.0: _F().celu(x, alpha)),
        ("torch.softplus", lambda x, beta=1.0, threshold=20.0: _F().softplus(x, beta,
                                                                             threshold)),
        ("torch.hardswish", lambda x: _F().hardswish(x)),
        ("torch.hardsigmoid", lambda x: _F().hardsigmoid(x)),
        ("torch.mish", lambda x: _F().mish(x)),
        ("torch.log_sigmoid", lambda x: _F().logsigmoid(x)),
        ("torch.prelu", lambda x, w: _F().prelu(x, w)),
        ("torch.glu", lambda x, dim=-1: _F().glu(x, dim)),
        ("torch.threshold", lambda x, th, value: _F().threshold(x, th, value)),
        ("torch.mse_loss", lambda a, b, reduction=1: _F().mse_loss(
            a, b, reduction=_reduction(reduction))),
        ("torch.l1_loss", lambda a, b, reduction=1: _F().l1_loss(
            a, b, reduction=_reduction(reduction))),
        ("torch.cosine_similarity", lambda a, b, dim=1, eps=1e-8: _F().cosine_similarity(
            a, b, dim, eps)),
        ("torch.pairwise_distance", lambda a, b, p=2.0, eps=1e-6, keepdim=False:
            _F().pairwise_distance(a, b, p, eps, keepdim)),
        ("torch.one_hot", lambda t, n=-1: _F().one_hot(t, n)),
        ("torch.ctc_loss", lambda lp, t, il, tl, blank=0, reduction=1, zero_infinity=False:
            _F().ctc_loss(lp, t, il, tl, blank, _reduction(reduction), zero_infinity)),
        ("torch.segment_reduce", _segment_reduce),
        ("torch.__invert__", lambda a: ~a), ("torch.__lshift__", lambda a, b: a << b),
        ("torch.__rshift__", lambda a, b: a >> b), ("torch.mT", lambda x: x.mT),
        ("torch.gcd", _math("gcd")), ("torch.factorial", _math("factorial")),
        ("torch.degrees", _math("degrees")), ("ops.prim.divmod", divmod)):
    TABLE.setdefault(_name, _fn)


def _upsample(mode):
    def op(input, output_size, *rest):
        align = None
        if mode == "bilinear":
            align, rest = rest[0], rest[1:]
        scales = rest[0] if rest else None
        if output_size is not None and not isinstance(scales, (list, tuple)):
            scales = None  # the (output_size, scales_h, scales_w) overload: size decides
        if output_size is not None:
            scales = None
        return _F().interpolate(input, size=None if output_size is None else list(output_size),
                                scale_factor=None if scales is None else list(scales),
                                mode=mode, align_corners=align)
    return op


TABLE.setdefault("torch.upsample_nearest2d", _upsample("nearest"))
TABLE.setdefault("torch.upsample_bilinear2d", _upsample("bilinear"))
