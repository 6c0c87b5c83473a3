"""uint8 ``F.interpolate`` (bilinear, bicubic, lanczos, antialias) bit for bit against
torch, and float ``antialias=True`` with its gradients (docs/nn.md, ember/ops/resample_aa.py).

torch resizes uint8 images in fixed point, so "close" is not enough: every uint8 result
is compared with ``np.array_equal`` over a seeded sweep of shapes, channel counts,
memory layouts and size/scale_factor forms.
"""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check, check_raises

import ember

F = torch.nn.functional
EF = ember.nn.functional
SCALES = [0.25, 0.3, 0.5, 0.75, 0.9, 1.0, 1.1, 1.5, 1.7, 2.0, 3.0, 4.0]
# without AVX2 torch takes its generic kernel for 1-4 channels too, and that kernel
# repeats output row 0 when the output width is 1 (see _torch_repeats_row0)
_NO_AVX2 = torch.backends.cpu.get_cpu_capability() == "DEFAULT"


def _layouts(a):
    """(torch, ember) pairs of the same uint8 image: row-major, channels-last, strided."""
    yield torch.from_numpy(a.copy()), ember.tensor(a.copy())
    yield (torch.from_numpy(a.copy()).contiguous(memory_format=torch.channels_last),
           ember.tensor(a.copy()).contiguous(memory_format=ember.channels_last))
    wide = np.repeat(a, 2, axis=3)
    yield torch.from_numpy(wide)[..., ::2], ember.tensor(wide)[..., ::2]


def _random_kwargs(rng, k, max_out):
    kw = dict(mode=("bilinear", "bicubic", "lanczos")[k % 3],
              align_corners=bool(rng.integers(2)), antialias=bool(rng.integers(2)))
    if kw["mode"] == "lanczos":  # torch's lanczos needs antialias and no align_corners
        kw.update(align_corners=False, antialias=True)
    form = k // 3 % 4
    if form == 0:
        kw["size"] = tuple(int(v) for v in rng.integers(1, max_out, 2))
    elif form == 1:
        kw["size"] = int(rng.integers(1, max_out))
    elif form == 2:
        kw["scale_factor"] = float(rng.choice(SCALES))
        kw["recompute_scale_factor"] = bool(rng.integers(2))
    else:
        kw["scale_factor"] = tuple(float(v) for v in rng.uniform(0.2, 3.5, 2).round(3))
        kw["recompute_scale_factor"] = (None, False, True)[int(rng.integers(3))]
    return kw


def _refused(xe, out_hw):
    """ember's documented refusal: more than 4 channels, width 1, height changing, not
    channels-last (torch 2.13 repeats output row 0 there)."""
    n, c, h, w = xe.shape
    return out_hw[1] == 1 and out_hw[0] != h and c > 4 and \
        not xe.is_contiguous(memory_format=ember.channels_last)


def _compare_uint8(a, kw):
    counted = 0
    for xt, xe in _layouts(a):
        try:
            yt = F.interpolate(xt, **kw)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                EF.interpolate(xe, **kw)
            continue
        if _refused(xe, yt.shape[2:]) or _NO_AVX2 and yt.shape[3] == 1 and \
                yt.shape[2] != a.shape[2]:
            if _refused(xe, yt.shape[2:]):
                with pytest.raises(NotImplementedError, match="row 0"):
                    EF.interpolate(xe, **kw)
            continue
        ye = EF.interpolate(xe, **kw)
        assert ye.dtype == ember.uint8 and tuple(ye.shape) == tuple(yt.shape), kw
        assert np.array_equal(ye.numpy(), yt.numpy()), (a.shape, kw)
        if yt.is_contiguous(memory_format=torch.channels_last) and not yt.is_contiguous():
            assert ye.is_contiguous(memory_format=ember.channels_last)  # the layout follows
        counted += 1
    return counted


@pytest.mark.parametrize("seed", range(4))
def test_uint8_sweep_small(seed):
    """Small images, every form of the call: sizes 1..20 to 1..30, 1-6 channels."""
    rng = np.random.default_rng(seed)
    compared = 0
    for k in range(80):
        a = rng.integers(0, 256, (int(rng.integers(1, 3)), int(rng.integers(1, 7)),
                                  *(int(v) for v in rng.integers(1, 20, 2))), dtype=np.uint8)
        compared += _compare_uint8(a, _random_kwargs(rng, k, 30))
    assert compared > 150


def test_uint8_larger_images():
    """Realistic sizes in both directions, and downscales so strong (over 128 inputs per
    output) that the weights take all 22 fraction bits."""
    rng = np.random.default_rng(7)
    shapes = [((1, 3, 64, 48), (17, 101)), ((2, 4, 33, 70), (80, 9)), ((1, 6, 45, 37), (45, 90)),
              ((1, 1, 600, 3), (2, 3)), ((1, 5, 4, 700), (4, 3)), ((1, 2, 300, 260), (1, 2))]
    for shape, size in shapes:
        a = rng.integers(0, 256, shape, dtype=np.uint8)
        for mode, aa in (("bilinear", False), ("bilinear", True), ("bicubic", False),
                         ("bicubic", True), ("lanczos", True)):
            assert _compare_uint8(a, dict(size=size, mode=mode, antialias=aa)) >= 2


def test_uint8_extremes_clamp():
    """Black-and-white edges: bicubic overshoots past 0 and 255, and is clamped."""
    a = np.zeros((1, 3, 8, 8), np.uint8)
    a[:, :, :, 4:] = 255
    a[:, 1, 4:] = 255 - a[:, 1, 4:]
    for aa in (False, True):
        for ac in (False, True):
            assert _compare_uint8(a, dict(size=(13, 21), mode="bicubic", antialias=aa,
                                          align_corners=ac)) == 3
    assert _compare_uint8(a, dict(size=(5, 3), mode="lanczos", antialias=True)) == 3


@pytest.mark.filterwarnings("ignore:`nn.functional.upsample_bilinear` is deprecated")
def test_upsample_bilinear_uint8():
    a = np.random.default_rng(3).integers(0, 256, (2, 3, 5, 7), dtype=np.uint8)
    for kw in (dict(size=(9, 4)), dict(scale_factor=2)):
        np.testing.assert_array_equal(
            EF.upsample_bilinear(ember.tensor(a), **kw).numpy(),
            F.upsample_bilinear(torch.from_numpy(a), **kw).numpy())


def test_uint8_refusals():
    a = np.random.default_rng(4).integers(0, 256, (1, 5, 6, 4), dtype=np.uint8)
    with pytest.raises(NotImplementedError, match="row 0"):
        EF.interpolate(ember.tensor(a), size=(9, 1), mode="bilinear")
    # torch's row-major 3-channel kernel fails an internal assertion at 1x1
    b = a[:, :3].copy()
    check_raises(lambda m, x: m.nn.functional.interpolate(x, size=(1, 1), mode="bilinear"),
                 b, exc=RuntimeError)
    # other integer dtypes stay torch's NotImplementedError
    check_raises(lambda m, x: m.nn.functional.interpolate(x, size=3, mode="bilinear"),
                 a.astype(np.int16), exc=NotImplementedError)


def test_antialias_argument_errors():
    x = np.zeros((1, 2, 4), np.float32)
    y = np.zeros((1, 2, 4, 4), np.float32)
    for a, kw, exc in ((x, dict(mode="linear", antialias=True), ValueError),
                       (y, dict(mode="nearest", antialias=True), ValueError),
                       (x, dict(mode="lanczos", antialias=True), ValueError),
                       (x, dict(mode="lanczos"), NotImplementedError),
                       (y, dict(mode="lanczos"), ValueError),
                       (y, dict(mode="lanczos", antialias=True, align_corners=True), ValueError)):
        err = check_raises(lambda m, t, kw=kw: m.nn.functional.interpolate(t, size=3, **kw),
                           a, exc=exc)
        with pytest.raises(exc) as t_err:
            F.interpolate(torch.from_numpy(a), size=3, **kw)
        assert str(err) == str(t_err.value)


def _aa(size=None, scale_factor=None, mode="bilinear", align_corners=False, rsf=None):
    def fn(m, x):
        return m.nn.functional.interpolate(x, size=size, scale_factor=scale_factor, mode=mode,
                                           align_corners=align_corners, antialias=True,
                                           recompute_scale_factor=rsf)
    return fn


FLOAT_AA = [
    Case("aa_bilinear_down", _aa((3, 5)), [(2, 3, 11, 13)]),
    Case("aa_bilinear_up_down", _aa((17, 4)), [(1, 2, 6, 9)]),
    Case("aa_bilinear_align_corners", _aa((4, 7), align_corners=True), [(1, 2, 9, 15)]),
    Case("aa_bicubic_down", _aa((4, 3), mode="bicubic"), [(2, 2, 13, 10)]),
    Case("aa_bicubic_up", _aa((9, 12), mode="bicubic", align_corners=True), [(1, 3, 5, 4)]),
    Case("aa_bicubic_scale", _aa(scale_factor=(0.45, 1.7), mode="bicubic"), [(1, 2, 12, 7)]),
    Case("aa_bilinear_recompute", _aa(scale_factor=0.3, rsf=True), [(1, 2, 20, 14)]),
    Case("aa_bilinear_f32", _aa((5, 3)), [(2, 3, 16, 11)], dtype=np.float32),
    Case("aa_bicubic_f32", _aa((3, 20), mode="bicubic"), [(1, 4, 10, 8)], dtype=np.float32),
    Case("lanczos_down_up", _aa((4, 19), mode="lanczos"), [(2, 2, 15, 6)]),
    Case("lanczos_scale", _aa(scale_factor=(2.5, 0.4), mode="lanczos"), [(1, 3, 4, 16)]),
]


@cases(FLOAT_AA)
def test_float_antialias(case):
    check(case)


def test_float_antialias_sweep():
    """Forward and first gradients over random sizes, layouts and scale factors."""
    rng = np.random.default_rng(11)
    compared = 0
    for k in range(60):
        kw = _random_kwargs(rng, k, 20)
        kw["antialias"] = True
        dt = (torch.float32, torch.float64)[k // 2 % 2]
        a = rng.standard_normal((int(rng.integers(1, 3)), int(rng.integers(2, 5)),
                                 *(int(v) for v in rng.integers(1, 14, 2))))
        xt = torch.tensor(a, dtype=dt).contiguous(memory_format=torch.channels_last)
        xe = ember.tensor(a, dtype=getattr(ember, str(dt)[6:])).contiguous(
            memory_format=ember.channels_last)
        xt.requires_grad_(True)
        xe.requires_grad_(True)
        try:
            yt = F.interpolate(xt, **kw)
        except RuntimeError:  # an empty output
            with pytest.raises(RuntimeError):
                EF.interpolate(xe, **kw)
            continue
        ye = EF.interpolate(xe, **kw)
        tol = 1e-5 if dt == torch.float32 else 1e-12
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=tol,
                                   atol=tol)
        g = rng.standard_normal(tuple(yt.shape))
        gt, = torch.autograd.grad(yt, xt, torch.tensor(g, dtype=dt))
        skipped = any(o == i for o, i in zip(yt.shape[2:], a.shape[2:])) and \
            kw.get("scale_factor") is not None and not kw.get("recompute_scale_factor")
        try:
            ge, = ember.autograd.grad(ye, xe, ember.tensor(g, dtype=ye.dtype))
        except NotImplementedError as e:
            assert skipped and "does not change" in str(e), (kw, a.shape, str(e))
            continue
        np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=tol, atol=tol)
        compared += 1
    assert compared > 40


def test_float_antialias_refusals():
    a = np.random.default_rng(5).standard_normal((1, 2, 6, 4))
    with pytest.raises(NotImplementedError, match="row 0"):
        EF.interpolate(ember.tensor(a), size=(9, 1), mode="bilinear", antialias=True)
    # an unchanged dim under a scale_factor: torch's forward skips it, its backward does not
    x = ember.tensor(a, requires_grad=True)
    y = EF.interpolate(x, scale_factor=1.1, mode="bicubic", antialias=True)
    xt = torch.tensor(a)
    np.testing.assert_allclose(
        y.detach().numpy(),
        F.interpolate(xt, scale_factor=1.1, mode="bicubic", antialias=True).numpy(),
        rtol=1e-12, atol=1e-12)
    with pytest.raises(NotImplementedError, match="does not change"):
        y.sum().backward()


@pytest.mark.parametrize("shape,mode,size", [
    ((2, 3, 4), "linear", 0), ((2, 3, 0), "nearest", 2),
    ((2, 3, 4, 5, 6), "trilinear", (1, 0, 2)), ((2, 0, 0, 5), "bilinear", (2, 2)),
    ((2, 0, 4, 5), "bicubic", (2, 2)), ((2, 0, 4), "nearest-exact", 3)])
def test_empty_sizes_raise_as_torch(shape, mode, size):
    """Zero-sized spatial dims or channels: torch's RuntimeError and message."""
    for dtype in (np.float32, np.uint8):
        if dtype == np.uint8 and mode not in ("bilinear", "bicubic"):
            continue
        err = check_raises(lambda m, x: m.nn.functional.interpolate(x, size=size, mode=mode),
                           np.zeros(shape, dtype), exc=RuntimeError)
        with pytest.raises(RuntimeError) as t_err:
            F.interpolate(torch.zeros(shape, dtype=getattr(torch, np.dtype(dtype).name)),
                          size=size, mode=mode)
        assert str(err) == str(t_err.value)


def test_empty_batch():
    for dtype, aa in ((np.uint8, False), (np.uint8, True), (np.float32, True)):
        y = EF.interpolate(ember.tensor(np.zeros((0, 3, 4, 5), dtype)), size=(3, 7),
                           mode="bicubic", antialias=aa)
        assert tuple(y.shape) == (0, 3, 3, 7) and y.dtype == ember.tensor(np.zeros(1, dtype)).dtype


class _Resizes(torch.nn.Module):
    def forward(self, x):
        return (F.interpolate(x, size=(5, 7), mode="bilinear", antialias=True),
                F.interpolate(x, scale_factor=0.5, mode="bicubic", antialias=True),
                F.interpolate(x, size=(4, 4), mode="lanczos", antialias=True),
                F.interpolate(x, size=(9, 3), mode="bicubic"))


@pytest.mark.filterwarnings("ignore:this TorchScript archive uses")
def test_torchscript_archive_with_antialias(tmp_path):
    """A torch-scripted F.interpolate(antialias=True) reaches torch._upsample_*2d_aa,
    which ember.jit.load runs through the same kernels."""
    path = str(tmp_path / "aa.pt")
    scripted = torch.jit.script(_Resizes())
    scripted.save(path)
    loaded = ember.jit.load(path)
    a = np.random.default_rng(2).integers(0, 256, (2, 3, 12, 10), dtype=np.uint8)
    for want, got in zip(scripted(torch.from_numpy(a)), loaded(ember.tensor(a))):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    f = a.astype(np.float32) / 255
    for want, got in zip(scripted(torch.from_numpy(f)), loaded(ember.tensor(f))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
