"""Integer and bool dtypes beyond OpInfo's samples, against torch 2.13: the order of
``softmin``'s negation and its ``dtype`` cast, where an unstable ``sort`` puts equal
values (every dtype, dim, direction and size, and the selections beside it), the
conversion of fill values, ``sum_to_size``'s int64 sums."""
import math

import numpy as np
import pytest
import torch

import ember
from ember.ops import sorting

INTS = ["int8", "uint8", "int16", "int32", "int64"]
ALL = INTS + ["bool"]
SORTABLE = ALL + ["float16", "bfloat16", "float32", "float64"]


def _pair(name, values):
    """The same tensor in torch and ember."""
    t = torch.tensor(values, dtype=getattr(torch, name))
    e = ember.tensor(t.float().numpy() if name == "bfloat16" else t.numpy())
    return t, e.to(getattr(ember, name))


def _np(x):
    return x.float().numpy() if x.dtype in (torch.bfloat16, ember.bfloat16) else x.numpy()


def _same(e, t):
    assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1], (e.dtype, t.dtype)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(_np(e), _np(t))


def _raises_alike(fe, ft):
    with pytest.raises(Exception) as te:
        ft()
    with pytest.raises(type(te.value)) as ee:
        fe()
    assert str(ee.value) == str(te.value)


# ----- softmin: negated in the input's dtype, then cast ---------------------------------
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmin_negates_before_the_cast(name, dtype):
    info = np.iinfo(name) if name != "bool" else None
    values = [True, False, True] if info is None else \
        [0, 1, info.min, info.max, info.max - 1, min(5, info.max)]
    for shape in [(len(values),), (2, len(values)), (0,)]:
        t, e = _pair(name, np.resize(np.array(values, dtype=name), shape).tolist())
        ft = lambda t=t: torch.nn.functional.softmin(t, -1, dtype=getattr(torch, dtype))  # noqa: E731
        fe = lambda e=e: ember.nn.functional.softmin(e, -1, dtype=getattr(ember, dtype))  # noqa: E731
        if name == "bool":
            _raises_alike(fe, ft)
            continue
        want, got = ft(), fe()
        assert got.dtype == getattr(ember, dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-300)
    t, e = _pair("uint8", 7)  # 0-d
    np.testing.assert_array_equal(ember.nn.functional.softmin(e, 0, dtype=ember.float64).numpy(),
                                  torch.nn.functional.softmin(t, 0, dtype=torch.float64).numpy())


def test_softmin_graph_and_trace_of_bool():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = ember.nn.functional.softmin(x, 0, dtype=ember.float64)
    assert y.grad_fn.name() == "SoftmaxBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "ToCopyBackward0"
    assert y.grad_fn.next_functions[0][0].next_functions[0][0].name() == "NegBackward0"
    _raises_alike(lambda: ember.trace(ember.ones(2, 2, dtype=ember.bool)),
                  lambda: torch.trace(torch.ones(2, 2, dtype=torch.bool)))


_WITH_DTYPE = {
    "softmax": lambda m, x, d: m.softmax(x, 0, dtype=d),
    "log_softmax": lambda m, x, d: m.nn.functional.log_softmax(x, 0, dtype=d),
    "cumsum": lambda m, x, d: m.cumsum(x, 0, dtype=d),
    "cumprod": lambda m, x, d: m.cumprod(x, 0, dtype=d),
    "sum": lambda m, x, d: m.sum(x, dtype=d),
    "sum_dim": lambda m, x, d: m.sum(x, 0, dtype=d),
    "prod": lambda m, x, d: m.prod(x, dtype=d),
    "mean": lambda m, x, d: m.mean(x, dtype=d),
    "nansum": lambda m, x, d: m.nansum(x, 0, dtype=d),
    "norm": lambda m, x, d: m.norm(x, dtype=d),
}


@pytest.mark.parametrize("op", sorted(_WITH_DTYPE))
def test_dtype_argument_casts_first(op):
    """The other ops with ``dtype=`` cast before they compute (no wrapping); a bool
    ``dtype`` for a scan is refused, as PyTorch's kernels have no bool loop."""
    f = _WITH_DTYPE[op]
    for name in ALL:
        info = np.iinfo(name) if name != "bool" else None
        values = [True, False, True] if info is None else [info.min, info.max, info.max, 1]
        t, e = _pair(name, values)
        for dtype in ("float64", "int16", "int64", "bool"):
            ft = lambda t=t, dtype=dtype: f(torch, t, getattr(torch, dtype))  # noqa: E731
            fe = lambda e=e, dtype=dtype: f(ember, e, getattr(ember, dtype))  # noqa: E731
            try:
                want = ft()
            except Exception:  # noqa: BLE001 - then ember raises the same
                _raises_alike(fe, ft)
                continue
            got = fe()
            assert got.dtype == getattr(ember, dtype)
            np.testing.assert_allclose(got.numpy().astype(float), want.numpy().astype(float),
                                       rtol=1e-6)


# ----- sort without a stable order: std::sort's places for equal values ------------------
def _tied(name, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 3, shape, generator=g)
    x = x > 0 if name == "bool" else x.to(getattr(torch, name))
    if x.is_floating_point() and x.numel() > 4:
        flat = x.view(-1)
        flat[0], flat[1], flat[2], flat[3] = math.nan, -0.0, math.nan, math.inf
    e = ember.tensor(x.float().numpy()).to(getattr(ember, name))
    return x, e


SHAPES = [((17,), 0), ((100,), 0), ((2049,), 0), ((5000,), -1), ((6, 33), 1), ((33, 6), 0),
          ((4, 5, 40), -2), ((1,), 0), ((0,), 0), ((3, 0), 1), ((), 0)]


# torch's ascending unstable sort of floating rows on AVX-512 CPUs is a vectorized sort
# (its order among equal values follows sorting networks ember does not model; elsewhere
# std::sort's, which ember replays): there only the values and a valid order are compared
SIMD_SORT = torch.backends.cpu.get_cpu_capability() == "AVX512"


def _simd_order(x, desc, kw):
    return SIMD_SORT and x.is_floating_point() and not desc and not kw.get("stable")


def _same_order(ei, ti, x, dim, desc, kw, msg):
    """ember's indices are torch's, or (torch's vectorized sort) a valid order."""
    if not _simd_order(x, desc, kw) or x.dim() == 0:
        np.testing.assert_array_equal(ei.numpy(), ti.numpy(), err_msg=msg)
        return
    picked = torch.take_along_dim(x, torch.from_numpy(ei.numpy()), dim)
    np.testing.assert_array_equal(_np(picked), _np(torch.take_along_dim(x, ti, dim)),
                                  err_msg=msg)
    assert np.array_equal(np.sort(ei.numpy(), axis=dim), np.sort(ti.numpy(), axis=dim))


@pytest.mark.parametrize("name", SORTABLE)
def test_unstable_sort_ties_as_torch(name):
    for shape, dim in SHAPES:
        x, e = _tied(name, shape)
        for desc in (False, True):
            for kw in ({}, {"stable": False}, {"stable": True}):
                tv, ti = torch.sort(x, dim=dim, descending=desc, **kw)
                ev, ei = ember.sort(e, dim=dim, descending=desc, **kw)
                _same_order(ei, ti, x, dim, desc, kw, f"{shape} {desc}")
                np.testing.assert_array_equal(_np(ev), _np(tv))
                ta = torch.argsort(x, dim=dim, descending=desc, **kw)
                _same_order(ember.argsort(e, dim=dim, descending=desc, **kw), ta, x, dim,
                            desc, kw, f"argsort {shape} {desc}")
    x, e = _tied(name, (40, 30))
    np.testing.assert_array_equal(_np(ember.msort(e)), _np(torch.msort(x)))
    # a transposed (non-contiguous) input, and an expanded one (stride 0: kept in order)
    _same_order(ember.sort(e.t(), 1)[1], torch.sort(x.t(), 1)[1], x.t(), 1, False, {}, "t")
    te, ee = x[:1].expand(5, 30).t(), e[:1].expand(5, 30).t()
    _same_order(ember.sort(ee, 1)[1], torch.sort(te, 1)[1], te, 1, False, {}, "expanded")


@pytest.mark.parametrize("name", ["int8", "uint8", "int32", "bool", "float32"])
def test_unstable_sort_large_1d(name):
    """From 32768 elements a 1-D ascending integer sort is fbgemm's stable radix sort
    (not for bool, floats, 2-D rows or descending)."""
    for shape in [(32767,), (32768,), (40000,), (1, 40000)]:
        x, e = _tied(name, shape, seed=1)
        for desc in (False, True):
            np.testing.assert_array_equal(ember.sort(e, descending=desc)[1].numpy(),
                                          torch.sort(x, descending=desc)[1].numpy())


def test_unstable_sort_without_numba(monkeypatch):
    """The Python replay of std::sort gives the kernel's indices."""
    monkeypatch.setitem(sorting._SORT_NUMBA, "sort", None)
    for name in ["int8", "bool", "float32"]:
        x, e = _tied(name, (3, 300), seed=2)
        for desc in (False, True):
            _same_order(ember.sort(e, descending=desc)[1], torch.sort(x, descending=desc)[1],
                        x, -1, desc, {}, f"{name} {desc}")


def test_unstable_sort_extremes():
    for name in INTS:
        info = np.iinfo(name)
        vals = np.resize(np.array([info.min, info.max, 0, info.min, info.max], dtype=name), 50)
        t, e = _pair(name, vals.tolist())
        for desc in (False, True):
            np.testing.assert_array_equal(ember.sort(e, descending=desc)[1].numpy(),
                                          torch.sort(t, descending=desc)[1].numpy())


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "int32", "float16", "bfloat16"])
def test_selections_on_ties(name):
    for shape, dim in [((17,), 0), ((100,), 0), ((2049,), 0), ((6, 33), 1), ((33, 6), 0)]:
        x, e = _tied(name, shape, seed=3)
        for f in (lambda m, v, d: m.topk(v, 3, dim=d),
                  lambda m, v, d: m.topk(v, 2, dim=d, largest=False),
                  lambda m, v, d: m.topk(v, 2, dim=d, sorted=False),
                  lambda m, v, d: m.kthvalue(v, 2, dim=d), lambda m, v, d: m.median(v, dim=d),
                  lambda m, v, d: m.mode(v, dim=d)):
            (tv, ti), (ev, ei) = f(torch, x, dim), f(ember, e, dim)
            np.testing.assert_array_equal(ei.numpy(), ti.numpy())
            np.testing.assert_array_equal(_np(ev), _np(tv))
        _same(ember.median(e), torch.median(x))


# ----- fill values: PyTorch's conversion -------------------------------------------------
FILLS = [0, -1, -9, 127, 128, -128, -129, 255, 256, -255, -256, 32767, -32769, 2 ** 31,
         -2 ** 31 - 1, 2 ** 63 - 1, -2 ** 63, 2 ** 63, 2 ** 64, -2 ** 63 - 1, 1.5, -1.5,
         -0.5, 127.9, 255.5, math.nan, math.inf, -math.inf, 1e20, True, False, 2 + 0j, 2 + 1j]


def _fills(m, name, v):
    d = getattr(m, name)
    return [lambda: m.full((2, 3), v, dtype=d), lambda: m.full_like(m.zeros(3, dtype=d), v),
            lambda: m.zeros(2, dtype=d).fill_(v), lambda: m.zeros(1, dtype=d).new_full((2,), v),
            lambda: m.zeros(1, dtype=d).fill_(v), lambda: m.zeros((), dtype=d).fill_(v),
            lambda: m.zeros(0, dtype=d).fill_(v)]


@pytest.mark.parametrize("name", ALL + ["float16", "float32"])
def test_fill_values_convert_as_torch(name):
    for v in FILLS:
        for fe, ft in zip(_fills(ember, name, v), _fills(torch, name, v)):
            try:
                want = ft()
            except Exception:  # noqa: BLE001 - then ember raises the same
                _raises_alike(fe, ft)
                continue
            _same(fe(), want)


def test_fill_with_tensor_casts():
    for name in INTS:
        for v in (-9, 300, -1.5):
            t = torch.zeros(3, dtype=getattr(torch, name)).fill_(torch.tensor(v))
            e = ember.zeros(3, dtype=getattr(ember, name)).fill_(ember.tensor(v))
            _same(e, t)


# ----- sum_to_size: bool and integers sum to int64 ---------------------------------------
@pytest.mark.parametrize("name", ALL + ["float16", "float32"])
def test_sum_to_size_dtype(name):
    for shape, size in [((2, 3), (1, 3)), ((2, 3), (3,)), ((2, 3), (2, 3)), ((2, 3), ()),
                        ((), ()), ((0, 3), (1, 3)), ((4, 0), (1, 0)), ((2, 1), (2, 1))]:
        x, e = _tied(name, shape, seed=4) if name != "float32" else _tied("int8", shape)
        if name == "float32":
            x, e = x.float(), e.float()
        if name == "bool":
            x, e = x.bool(), e.bool()
        _same(e.sum_to_size(size), x.sum_to_size(size))
        assert (e.sum_to_size(size) is e) == (x.sum_to_size(size) is x)
    x = ember.tensor(2.0, requires_grad=True)
    assert x.sum_to_size(()).grad_fn.name() == "SumBackward0"
    y = ember.ones(3, requires_grad=True).sum_to_size(())
    assert y.grad_fn.name() == "SumBackward0"


@pytest.mark.parametrize("nans", [1, 2])
def test_unstable_sort_distinct_bfloat16_with_nan(nans):
    """Over 1,024 distinct bfloat16 values: the rows without ties take NumPy's sort,
    which must put NaN where std::sort does; two NaNs make a tie."""
    x = torch.arange(0x3F80, 0x3F80 + 1500, dtype=torch.int16).view(torch.bfloat16)
    x = x[torch.randperm(len(x), generator=torch.Generator().manual_seed(0))].clone()
    x[5] = math.nan
    if nans == 2:
        x[100] = math.nan
    e = ember.tensor(x.float().numpy()).bfloat16()
    for desc in (False, True):
        np.testing.assert_array_equal(ember.sort(e, descending=desc)[1].numpy(),
                                      torch.sort(x, descending=desc)[1].numpy())


@pytest.mark.parametrize("name", ALL)
def test_softmax_of_empty_integers_keeps_the_dtype(name):
    for shape, dim in [((0, 3), 1), ((0,), 0), ((3, 0), 0)]:
        t, e = _pair(name, np.zeros(shape, dtype=name).tolist())
        t, e = t.reshape(shape), e.reshape(shape)
        for op in ("softmax", "log_softmax"):
            _same(getattr(ember, op)(e, dim), getattr(torch, op)(t, dim))
