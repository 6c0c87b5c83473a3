"""bfloat16 (through ml_dtypes) against torch: creation, printing, promotion, casts,
arithmetic, reductions, matmul, autograd; and the storage dtypes torch has few ops for
(uint16/32/64, the float8 family): creation, casts both ways (torch's rounding and
saturation), promotion errors, and checkpoints bit-exact with torch.save/torch.load."""
import io

import ml_dtypes
import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(0)
X = (RNG.standard_normal((4, 5)) * 3).astype(np.float32)
Y = (RNG.standard_normal((4, 5)) * 3).astype(np.float32)
FLOAT8 = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


def _bits(t):
    """The raw bits of a torch or ember tensor, as a NumPy array of unsigned ints."""
    if isinstance(t, torch.Tensor):
        ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}
        return t.detach().contiguous().view(ints[t.element_size()]).numpy().view(
            f"u{min(t.element_size(), 8)}")
    a = np.ascontiguousarray(t.detach()._data)
    return a.reshape(-1).view(f"u{min(a.itemsize, 8)}")


def _same_values(e, t):
    """Equal bits, except that any NaN equals any NaN (payloads are not meaningful)."""
    assert e.dtype.name == str(t.dtype).replace("torch.", "")
    a, b = e.float().numpy(), t.float().numpy()
    nan = np.isnan(a) & np.isnan(b)
    np.testing.assert_array_equal(np.where(nan, 0, _bits(e).reshape(a.shape)),
                                  np.where(nan, 0, _bits(t).reshape(b.shape)))


def _same(e, t):
    assert e.dtype.name == str(t.dtype).replace("torch.", "")
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(_bits(e).reshape(-1), _bits(t).reshape(-1))


OPS = {
    "add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b, "scalar": lambda m, a, b: a * 2 + 3,
    "exp": lambda m, a, b: (a / 4).exp(), "log": lambda m, a, b: a.abs().log(),
    "sqrt": lambda m, a, b: a.abs().sqrt(), "tanh": lambda m, a, b: a.tanh(),
    "sin": lambda m, a, b: a.sin(), "neg": lambda m, a, b: -a, "abs": lambda m, a, b: a.abs(),
    "sum": lambda m, a, b: a.sum(), "sum_dim": lambda m, a, b: a.sum(1),
    "mean": lambda m, a, b: a.mean(0), "matmul": lambda m, a, b: a @ b.T,
    "relu": lambda m, a, b: m.relu(a), "maximum": lambda m, a, b: m.maximum(a, b),
    "eq": lambda m, a, b: a == b, "lt": lambda m, a, b: a < b,
    "cat": lambda m, a, b: m.cat([a, b]), "index": lambda m, a, b: a[1:, ::2],
    "to_float32": lambda m, a, b: a.float(), "to_half": lambda m, a, b: a.half(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_match_torch_bit_for_bit(name):
    res = [OPS[name](m, m.tensor(X).to(m.bfloat16), m.tensor(Y).to(m.bfloat16))
           for m in (ember, torch)]
    _same(*res)


def test_autograd():
    res = {}
    for m in (ember, torch):
        a = m.tensor(X).to(m.bfloat16).requires_grad_()
        b = m.tensor(Y).to(m.bfloat16).requires_grad_()
        loss = ((a * b).tanh() @ b.T).sum()
        loss.backward()
        res[m] = (loss, a.grad, b.grad)
    for e, t in zip(res[ember], res[torch]):
        np.testing.assert_allclose(e.detach().float().numpy(), t.detach().float().numpy(),
                                   rtol=2e-2, atol=0.1)
        assert e.dtype is ember.bfloat16


def test_creation_printing_promotion():
    for make in (lambda m: m.tensor([1.7, -2.5, 1e-3], dtype=m.bfloat16),
                 lambda m: m.zeros(2, 3, dtype=m.bfloat16),
                 lambda m: m.tensor([[1.0, 2.0]], dtype=m.bfloat16, requires_grad=True),
                 lambda m: m.ones(3, dtype=m.bfloat16) * 1e10):
        assert repr(make(ember)).replace("ember.", "torch.") == repr(make(torch))
    assert ember.tensor([1.7], dtype=ember.bfloat16).item() == \
        torch.tensor([1.7], dtype=torch.bfloat16).item()
    for a in ("float16", "float32", "float64", "int64", "bool", "bfloat16"):
        assert ember.promote_types(ember.bfloat16, getattr(ember, a)).name == \
            str(torch.promote_types(torch.bfloat16, getattr(torch, a))).replace("torch.", "")
    assert (ember.ones(2, dtype=ember.bfloat16) + ember.ones(2, dtype=ember.float16)).dtype \
        is ember.float32
    assert ember.bfloat16.is_floating_point and ember.ones(1, dtype=ember.bfloat16) \
        .is_floating_point()
    assert ember.tensor(np.ones(2, ml_dtypes.bfloat16)).dtype is ember.bfloat16
    assert ember.ones(2, dtype=ember.bfloat16).type() == "torch.BFloat16Tensor"


@pytest.mark.parametrize("name", ["bfloat16"] + FLOAT8)
def test_casts_follow_torch_rounding_and_saturation(name):
    vals = np.concatenate([RNG.standard_normal(500) * 10.0 ** RNG.uniform(-8, 6, 500),
                           [np.inf, -np.inf, np.nan, 0.0, -0.0, 448, 449, 464, 465, 500,
                            57344, 61440, 65504, 1e6, 240, 241, 2 ** -10, 2 ** -17]])
    for src in ("float32", "float64", "float16"):
        with np.errstate(over="ignore"):
            v = vals.astype(src)
        e = ember.tensor(v).to(getattr(ember, name))
        t = torch.tensor(v).to(getattr(torch, name))
        _same_values(e, t)
        for dst in ("float32", "float64", "float16", "int32", "bfloat16"):
            if dst == "int32":  # integer casts of in-range values only (inf/nan: undefined)
                e2 = ember.tensor(np.clip(np.nan_to_num(v), -100, 100)).to(getattr(ember, name))
                t2 = torch.tensor(np.clip(np.nan_to_num(v), -100, 100)).to(getattr(torch, name))
                _same(e2.to(ember.int32), t2.to(torch.int32))
                _same(ember.arange(-5, 5).to(getattr(ember, name)),
                      torch.arange(-5, 5).to(getattr(torch, name)))
            else:
                _same_values(e.to(getattr(ember, dst)), t.to(getattr(torch, dst)))
    e = ember.tensor([1.5, -3.25], dtype=getattr(ember, name))
    t = torch.tensor([1.5, -3.25], dtype=getattr(torch, name))
    assert repr(e).replace("ember.", "torch.") == repr(t)


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
def test_wide_unsigned(name):
    dt_e, dt_t = getattr(ember, name), getattr(torch, name)
    v = np.array([0, 1, 65535, 7], dtype=name)
    for f in (lambda m, a: a * a, lambda m, a: a == 7, lambda m, a: a & 3, lambda m, a: a | 8,
              lambda m, a: a ^ 5, lambda m, a: a.to(m.float64), lambda m, a: a.sum(),
              lambda m, a: m.cat([a, a]), lambda m, a: a[1:], lambda m, a: a.clone(),
              lambda m, a: m.zeros(3, dtype=getattr(m, name)), lambda m, a: a / 2):
        _same(f(ember, ember.tensor(v)), f(torch, torch.tensor(v.astype(np.int64)).to(dt_t)))
    assert repr(ember.tensor(v)).replace("ember.", "torch.") == \
        repr(torch.tensor(v.astype(np.int64)).to(dt_t))
    for other in ("int32", "uint8", "bool"):
        for m in (ember, torch):
            with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64"):
                m.promote_types(getattr(m, name), getattr(m, other))
    assert ember.promote_types(dt_e, ember.float32) is ember.float32


def test_float8_promotion_is_refused_like_torch():
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="Promotion for Float8 Types"):
            m.ones(2, dtype=m.float8_e4m3fn) * m.ones(2)


@pytest.mark.parametrize("name", ["bfloat16", "uint16", "uint32", "uint64", "complex64",
                                  "complex128"] + FLOAT8)
def test_checkpoints_bit_exact_with_torch(name):
    base = torch.arange(6, dtype=torch.float64).reshape(2, 3) * 1.37
    if name.startswith("complex"):
        base = base + 0.5j
    elif name.startswith("uint"):
        base = torch.arange(6).reshape(2, 3) * 1000
    t = base.to(getattr(torch, name))
    buf = io.BytesIO()
    torch.save({"w": t, "col": t[:, 1]}, buf)
    buf.seek(0)
    e = ember.load(buf)
    assert e["w"].dtype is getattr(ember, name)
    _same(e["w"], t)
    _same(e["col"], t[:, 1])
    out = io.BytesIO()
    ember.save(e, out)
    out.seek(0)
    back = torch.load(out)
    assert back["w"].dtype == t.dtype
    np.testing.assert_array_equal(_bits(back["w"]), _bits(t))
    np.testing.assert_array_equal(_bits(back["col"]), _bits(t[:, 1]))


def test_module_bfloat16():
    for m in (ember, torch):
        lin = m.nn.Linear(3, 2).bfloat16()
        assert lin.weight.dtype == m.bfloat16 and lin.weight.requires_grad


def test_without_ml_dtypes_the_error_names_the_extra():
    import subprocess
    import sys
    code = ("import sys; sys.modules['ml_dtypes'] = None\n"
            "import ember\n"
            "assert ember.ones(2, dtype=ember.uint16).dtype is ember.uint16\n"
            "try:\n    ember.zeros(2, dtype=ember.bfloat16)\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "pip install -e '.[numerics]'" in out.stdout, out.stdout + out.stderr


def test_cast_methods_and_einsum_in_bfloat16():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    e = ember.einsum("bij,bjk->bik", ember.from_numpy(a).bfloat16(), ember.from_numpy(b).bfloat16())
    t = torch.einsum("bij,bjk->bik", torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16())
    assert e.dtype == ember.bfloat16
    np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())
    assert ember.ones(2).cfloat().dtype == ember.complex64
    assert ember.ones(2).cdouble().dtype == ember.complex128
