"""float8_e8m0fnu and float4_e2m1fn_x2 (the MX formats' scale and packed values) against
torch 2.13."""
import subprocess
import sys

import pytest
import torch

import ember


def _bytes(t):
    return t.view(t.new_empty(0, dtype=_lib(t).uint8).dtype).tolist()


def _lib(t):
    return ember if isinstance(t, ember.Tensor) else torch


VALUES = [1.0, 2.0, 0.3, 3.0, 0.75, 1e-40, 5e-39, 1e39, -2.0, 0.0, -0.0, 1e38,
          float("inf"), float("-inf"), float("nan"), 7.0, 6.0, 2 ** -126]


@pytest.mark.parametrize("src", ["float32", "float64", "float16", "bfloat16"])
def test_e8m0_conversion_matches_torch(src):
    def run(lib):
        x = lib.tensor(VALUES, dtype=getattr(lib, src)).to(lib.float8_e8m0fnu)
        return x.view(lib.uint8).tolist(), [str(v) for v in x.float().tolist()]
    assert run(ember) == run(torch)


def test_e8m0_from_integers_bytes_factories_and_finfo_match_torch():
    def run(lib):
        d = lib.float8_e8m0fnu
        fi = lib.finfo(d)
        return (d.itemsize, d.is_floating_point, d.is_signed,
                lib.tensor([1, 3, 8, 0]).to(d).view(lib.uint8).tolist(),
                lib.tensor([0, 1, 127, 200, 254, 255], dtype=lib.uint8).view(d)
                .float().tolist().__repr__(),
                lib.zeros(3, dtype=d).view(lib.uint8).tolist(),
                lib.ones(2, dtype=d).float().tolist(),
                lib.tensor([4.0, 0.5], dtype=d).float().tolist(),
                lib.tensor([2.0, 4.0]).to(d).to(lib.float8_e4m3fn).float().tolist(),
                [fi.bits, fi.min, fi.max, fi.eps, fi.tiny, fi.resolution, fi.smallest_normal],
                lib.tensor([1.0]).to(d).type())
    assert run(ember) == run(torch)


def test_e8m0_keeps_ml_dtypes_unloaded_until_used():
    code = ("import sys, ember; d = ember.float8_e8m0fnu; d.is_signed, d.itemsize; "
            "assert 'ml_dtypes' not in sys.modules; ember.ones(1, dtype=d); "
            "assert 'ml_dtypes' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_float4_x2_is_named_and_refuses_tensors():
    d = ember.float4_e2m1fn_x2
    t = torch.float4_e2m1fn_x2
    assert (d.itemsize, d.is_floating_point, d.is_signed) == (t.itemsize, t.is_floating_point,
                                                              t.is_signed)
    assert repr(d) == "ember.float4_e2m1fn_x2" and d == ember.float4_e2m1fn_x2
    # torch refuses values of it too
    with pytest.raises(NotImplementedError, match="copy_kernel"):
        torch.ones(2).to(t)
    for make in (lambda: ember.zeros(2, dtype=d), lambda: ember.ones(2).to(d)):
        with pytest.raises(NotImplementedError, match="float4_e2m1fn_x2"):
            make()
