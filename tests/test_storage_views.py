"""``as_strided`` on the storage under a tensor, as in PyTorch: partial views of a larger
storage (a leaf made to require grad, ``detach()``), offsets outside the view, gradients
to the positions the input covers (shared among repeats), and the errors."""
import numpy as np
import pytest
import torch
from oracle import Case
from oracle import assert_close as _assert_close

import ember


def assert_close(e, t, name, what):
    _assert_close(e, t, Case(name, None, []), what)


def _both(fn):
    """``fn(m)`` for torch and ember: (ember result, torch result)."""
    return fn(ember), fn(torch)


@pytest.mark.parametrize("offset", [None, 0, 3, 8, 10, 12])
def test_partial_view_leaf(offset):
    def run(m):
        base = m.arange(20.0, dtype=m.float64)
        x = base[5:15].requires_grad_()
        kw = {} if offset is None else {"storage_offset": offset}
        y = x.as_strided((2, 3), (1, 2), **kw)
        g, = m.autograd.grad(y, x, m.arange(1.0, 7.0, dtype=m.float64).reshape(2, 3))
        return y, g, x.is_leaf, x._is_view(), y.storage_offset(), y.stride()
    (ey, eg, *emeta), (ty, tg, *tmeta) = _both(run)
    assert_close(ey, ty, "as_strided", "values")
    assert_close(eg, tg, "as_strided", "grad")
    assert emeta == tmeta


def test_detached_view_keeps_storage():
    def run(m):
        base = m.arange(12.0)
        d = base[4:8].detach()
        w = d.as_strided((3,), (2,), 1)  # reaches before d's first element
        w2 = d.as_strided((2, 2), (1, 2))  # from d's own offset
        base[1] = -1.0  # the storage is shared: writes show through
        return (d.storage_offset(), d.untyped_storage().nbytes(), d._is_view(),
                w.tolist(), w2.tolist())
    e, t = _both(run)
    assert e == t


def test_expanded_leaf_shares_gradient():
    def run(m):
        x = m.arange(3.0, dtype=m.float64).expand(2, 3).requires_grad_()
        y = x.as_strided((2, 2), (0, 1), 1)
        g, = m.autograd.grad(y, x, m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64))
        return g
    e, t = _both(run)
    assert_close(e, t, "as_strided expanded", "grad")


def test_second_derivative_and_view_of_view():
    def run(m):
        base = m.linspace(-1, 1, 24, dtype=m.float64).requires_grad_()
        x = base[2:20].view(3, 6)[:, 1:5]  # a differentiable, non-contiguous view
        y = x.as_strided((3, 2), (4, 3), 9) ** 2
        g, = m.autograd.grad(y.sum(), base, create_graph=True)
        gg, = m.autograd.grad((g * m.arange(24.0, dtype=m.float64)).sum(), base)
        return y, g, gg
    e, t = _both(run)
    for a, b, what in zip(e, t, ("values", "grad", "grad of grad")):
        assert_close(a, b, "as_strided view", what)


def test_result_reports_its_storage():
    def run(m):
        x = m.arange(10.0)
        y = x.as_strided((2, 2), (3, 1), 4)
        z = y.as_strided((3,), (1,), 1)  # from y's storage, which is x's
        return y.storage_offset(), y._base is x, z.tolist(), z.storage_offset()
    e, t = _both(run)
    assert e == t


@pytest.mark.parametrize("args", [((2, 2), (1, 2), 18), ((3,), (1,), 18),
                                  ((2, 2), (-1, 2), 10), ((2,), (1,), -1), ((2, 2), (1,), 0)])
def test_errors(args):
    errs = []
    for m in (torch, ember):
        with pytest.raises(RuntimeError) as err:
            m.arange(20.0)[5:15].as_strided(*args)
        errs.append(str(err.value))
    assert errs[0].split(",")[0] == errs[1].split(",")[0]


def test_empty_window_and_fortran_storage():
    for m in (torch, ember):
        assert m.arange(20.0)[5:15].as_strided((0,), (1,), 30).shape == (0,)
    a = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    e, t = ember.from_numpy(a), torch.from_numpy(a)
    assert e.stride() == t.stride()
    assert_close(e.as_strided((3, 2), (2, 1)), t.as_strided((3, 2), (2, 1)), "F", "values")
