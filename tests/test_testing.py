"""torch.testing: assert_close (tolerances, report) and make_tensor against torch."""
import numpy as np
import pytest
import torch

import ember


def _outcome(m, fn):
    try:
        fn(m)
    except Exception as e:  # noqa: BLE001 - the exception type is part of the comparison
        return type(e).__name__, str(e).replace("torch.", "X.").replace("ember.", "X.")
    return "ok", ""


def ac(m, *args, **kwargs):
    return m.testing.assert_close(*args, **kwargs)


CASES = {
    "float_mismatch": lambda m: ac(m, m.tensor([1., 2., 3.]),
                                                       m.tensor([1., 2.5, 3.0001])),
    "int_mismatch": lambda m: ac(m, m.tensor([1, 2, 3]), m.tensor([1, 4, 3])),
    "uint8_2d": lambda m: ac(m,
        m.tensor([[1, 2], [3, 4]], dtype=m.uint8), m.tensor([[1, 2], [9, 0]], dtype=m.uint8)),
    "scalar_tensor": lambda m: ac(m, m.tensor(1.5), m.tensor(1.0)),
    "python_numbers": lambda m: ac(m, 1.5, 1.0),
    "dtype": lambda m: ac(m, m.tensor([1., 2.]), m.tensor([1., 2.], dtype=m.float64)),
    "dtype_unchecked": lambda m: ac(m,
        m.tensor([1., 2.]), m.tensor([1., 2.], dtype=m.float64), check_dtype=False),
    "shape": lambda m: ac(m, m.tensor([1., 2.]), m.tensor([1., 2., 3.])),
    "nan": lambda m: ac(m, m.tensor([1., float("nan")]), m.tensor([1., float("nan")])),
    "equal_nan": lambda m: ac(m, m.tensor([1., float("nan")]),
                                                  m.tensor([1., float("nan")]), equal_nan=True),
    "nested": lambda m: ac(m,
        [m.tensor(1.), {"a": m.tensor([2., 3.])}], [m.tensor(1.), {"a": m.tensor([2., 4.])}]),
    "keys": lambda m: ac(m, {"a": 1}, {"b": 1}),
    "length": lambda m: ac(m, [1, 2], [1]),
    "only_rtol": lambda m: ac(m, m.tensor([1.]), m.tensor([1.1]), rtol=0.2),
    "explicit_tol": lambda m: ac(m, m.tensor([1.]), m.tensor([1.1]), rtol=0.2, atol=0),
    "numpy_pair": lambda m: ac(m, np.array([1., 2.]), np.array([1., 2.1])),
    "msg": lambda m: ac(m, m.tensor([1.]), m.tensor([1.5]), msg="custom"),
    "msg_callable": lambda m: ac(m, m.tensor([1.]), m.tensor([1.5]),
                                                     msg=lambda s: s + " EXTRA"),
    "bools": lambda m: ac(m, True, False),
    "number_types": lambda m: ac(m, 1, 1.0, check_dtype=True),
    "none": lambda m: ac(m, None, None),
    "float16": lambda m: ac(m, m.tensor([1., 2.], dtype=m.float16),
                                                m.tensor([1., 2.002], dtype=m.float16)),
    "float32_atol_edge": lambda m: ac(m, m.tensor([0., 1e-6]), m.tensor([0., 0.])),
    "float32_atol_fail": lambda m: ac(m, m.tensor([0., 1e-4]), m.tensor([0., 0.])),
    "inf": lambda m: ac(m, m.tensor([float("inf"), 1.]), m.tensor([float("inf"), 1.])),
    "inf_sign": lambda m: ac(m, m.tensor([float("inf"), 1.]),
                                                 m.tensor([-float("inf"), 1.])),
    "stride_same": lambda m: ac(m, m.ones(2, 3).t(), m.ones(2, 3).t().contiguous(),
                                                    check_stride=True),
    "stride": lambda m: ac(m, m.ones(2, 3).t(), m.ones(3, 2), check_stride=True),
    "float64_default": lambda m: ac(m, m.tensor([1.0], dtype=m.float64),
                                                        m.tensor([1.0 + 2e-7], dtype=m.float64)),
    "allclose_deprecated": lambda m: m.testing.assert_allclose(m.tensor([1.0]), [1.00005]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_assert_close_matches_torch(name):
    assert _outcome(ember, CASES[name]) == _outcome(torch, CASES[name])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int8", "uint8",
                                   "bool"])
def test_make_tensor_values_follow_torch(dtype):
    for kwargs in ({}, {"low": -2, "high": 3}, {"noncontiguous": True}, {"exclude_zero": True}):
        ember.manual_seed(3)
        torch.manual_seed(3)
        e = ember.testing.make_tensor(4, 5, dtype=getattr(ember, dtype), device="cpu", **kwargs)
        t = torch.testing.make_tensor(4, 5, dtype=getattr(torch, dtype), device="cpu", **kwargs)
        assert e.dtype.name == dtype and tuple(e.shape) == (4, 5)
        assert e.is_contiguous() == t.is_contiguous()
        np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_make_tensor_options():
    e = ember.testing.make_tensor((2, 3), dtype=ember.float32, device="cpu", requires_grad=True)
    assert e.requires_grad and e.is_leaf
    ember.manual_seed(0)
    torch.manual_seed(0)
    e = ember.testing.make_tensor(6, dtype=ember.float32, device="cpu", low=-1e39, high=1e39)
    t = torch.testing.make_tensor(6, dtype=torch.float32, device="cpu", low=-1e39, high=1e39)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    for m in (ember, torch):
        with pytest.raises(ValueError, match="requires_grad"):
            m.testing.make_tensor(2, dtype=m.int64, device="cpu", requires_grad=True)
        with pytest.raises(ValueError, match="must be less than"):
            m.testing.make_tensor(2, dtype=m.float32, device="cpu", low=3, high=1)
