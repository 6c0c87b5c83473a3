"""``copy_``, ``fill_``, ``zero_`` and ``torch.fill`` against torch: values, dtypes,
gradients through the written tensor and to the source, views, errors."""
import numpy as np
import pytest
from oracle import Case, cases, check, check_raises


def _fill_tail(m, x):
    y = x * 2
    y[1:].fill_(0.5)
    return y


def _copy_into_view(m, x, s):
    y = x * 1
    y[:, 1].copy_(s)
    return y


def _copy_cast(m, x):
    out = m.zeros(2, 3, dtype=m.int64)
    out.copy_(x * 3)
    return out


WRITES = [
    Case("fill_number", lambda m, x: (x * 1).fill_(2.5), [(3, 4)]),
    Case("fill_tensor_value", lambda m, x, v: (x * 1).fill_(v), [(3, 4), ()]),
    Case("fill_value_f64_into_f32",
         lambda m, x, v: (x.float() * 1).fill_(v), [(2, 3), ()], rtol=1e-6),
    Case("fill_view", _fill_tail, [(3, 2)]),
    Case("fill_int", lambda m, x: m.zeros(3, dtype=m.int32).fill_(2.7), [()], grad=False),
    Case("fill_bool", lambda m, x: m.zeros(3, dtype=m.bool).fill_(2), [()], grad=False),
    Case("fill_out_of_place", lambda m, x, v: m.fill(x, v), [(2, 3), ()]),
    Case("zero_", lambda m, x: (x * 3).zero_() + x, [(2, 3)]),
    Case("zero_method_function", lambda m, x: m.zero_(x * 1), [(4,)]),
    Case("copy_same_shape", lambda m, x, s: (x * 1).copy_(s), [(2, 3), (2, 3)]),
    Case("copy_broadcast", lambda m, x, s: (x * 1).copy_(s), [(4, 3), (3,)]),
    Case("copy_broadcast_ones", lambda m, x, s: (x * 1).copy_(s), [(2, 3, 4), (3, 1)]),
    Case("copy_dtype", lambda m, x, s: (x.float() * 1).copy_(s), [(2, 3), (2, 3)]),
    Case("copy_into_view", _copy_into_view, [(3, 3), (3,)]),
    Case("copy_to_int", _copy_cast, [(3,)], grad=False),
    Case("copy_0d", lambda m, x, s: (x * 1).copy_(s), [(2, 2), ()]),
]


@cases(WRITES)
def test_writes(case):
    check(case)


def test_writes_under_no_grad_into_leaves():
    import torch

    import ember
    for m in (ember, torch):
        w = m.ones(3, requires_grad=True)
        with m.no_grad():
            w.zero_()
            w[1:].fill_(4.0)
            w.copy_(w * 2)
        assert w.requires_grad and w.grad_fn is None
        assert w.tolist() == [0.0, 8.0, 8.0]


def test_version_counter_and_saved_tensor_check():
    import torch

    import ember
    for m in (ember, torch):
        x = m.randn(3, requires_grad=True)
        y = x.exp()
        v = y._version
        y.fill_(1.0)
        assert y._version == v + 1
        assert y.grad_fn.name() == "FillBackward2"
        assert (x * 1).fill_(m.tensor(1.0)).grad_fn.name() == "FillBackward3"
        assert m.fill(x, 1.0).grad_fn.name() == "FillBackward0"
        assert (x * 1).zero_().grad_fn.name() == "ZeroBackward0"
        z = x * 2
        z.copy_(x)
        with pytest.raises(RuntimeError):  # exp's saved output was overwritten
            x.exp().mul_(2).sum().backward()
        z.sum().backward()
        assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_write_errors():
    check_raises(lambda m, x: x.fill_(m.ones(2)), np.zeros(3))
    check_raises(lambda m, x: x.fill_("a"), np.zeros(3))
    check_raises(lambda m, x: x.copy_("a"), np.zeros(3))
    check_raises(lambda m, x, s: x.copy_(s), np.zeros((2, 3)), np.zeros(2))
    check_raises(lambda m, x: m.ones(2, requires_grad=True).fill_(1.0), np.zeros(3))
    check_raises(lambda m, x: m.ones(2, requires_grad=True).copy_(x), np.zeros(2))
