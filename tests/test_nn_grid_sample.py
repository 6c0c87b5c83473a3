"""F.grid_sample and F.affine_grid against torch: values, first and second derivatives
in the input and the grid, every mode, padding mode and align_corners, 2-D and 3-D."""
import itertools
import warnings

import numpy as np
import pytest
import torch

import ember

COMBOS = [c for c in itertools.product((2, 3), ("bilinear", "nearest", "bicubic"),
                                       ("zeros", "border", "reflection"), (False, True))
          if not (c[0] == 3 and c[1] == "bicubic")]


def _derivs(m, inp, grid, **kw):
    x = m.tensor(inp, requires_grad=True)
    g = m.tensor(grid, requires_grad=True)
    y = m.nn.functional.grid_sample(x, g, **kw)
    go = m.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape), dtype=y.dtype)
    gx, gg = m.autograd.grad(y, (x, g), go, create_graph=True)
    s = (gx ** 2).sum() + (gg ** 2).sum()
    if s.requires_grad:
        hx, hg = m.autograd.grad(s, (x, g), allow_unused=True, materialize_grads=True)
    else:  # nearest: the gradients do not depend on the inputs
        hx, hg = m.zeros_like(x), m.zeros_like(g)
    return [t.detach().numpy() for t in (y, gx, gg, hx, hg)]


@pytest.mark.parametrize("nd,mode,pad,ac", COMBOS)
def test_grid_sample_matches_torch(nd, mode, pad, ac):
    rng = np.random.default_rng(nd * 7 + len(mode) + len(pad) + ac)
    inp = rng.standard_normal((2, 3) + (4, 5, 6)[:nd][::-1])
    grid = rng.uniform(-1.3, 1.3, (2,) + (3, 2, 4)[:nd] + (nd,))
    kw = dict(mode=mode, padding_mode=pad, align_corners=ac)
    for a, b in zip(_derivs(ember, inp, grid, **kw), _derivs(torch, inp, grid, **kw)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_grid_sample_float32_and_exact_points():
    rng = np.random.default_rng(0)
    inp = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    # grid points exactly on pixel centres and on the borders
    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 5), np.linspace(-1, 1, 5)), -1)[None]
    grid = grid.astype(np.float32)
    for ac in (False, True):
        e = ember.nn.functional.grid_sample(ember.tensor(inp), ember.tensor(grid),
                                            align_corners=ac)
        t = torch.nn.functional.grid_sample(torch.tensor(inp), torch.tensor(grid),
                                            align_corners=ac)
        assert e.dtype == ember.float32
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size,ac", [((2, 3, 4, 5), False), ((2, 3, 4, 5), True),
                                     ((1, 1, 2, 3, 4), False), ((1, 1, 2, 3, 4), True),
                                     ((1, 1, 1, 3), True)])
def test_affine_grid_matches_torch(size, ac):
    nd = len(size) - 2
    rng = np.random.default_rng(1)
    theta = rng.standard_normal((size[0], nd, nd + 1))
    res = []
    for m in (ember, torch):
        th = m.tensor(theta, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grid = m.nn.functional.affine_grid(th, size, align_corners=ac)
        grid.pow(2).sum().backward()
        res.append((grid.detach().numpy(), th.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_errors_and_warnings_match_torch():
    for m in (ember, torch):
        F = m.nn.functional
        x, g = m.zeros(1, 1, 3, 3), m.zeros(1, 2, 2, 2)
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            F.grid_sample(x, g)
        with pytest.raises(ValueError, match="expected mode to be 'bilinear'"):
            F.grid_sample(x, g, mode="area", align_corners=False)
        with pytest.raises(ValueError, match="expected padding_mode"):
            F.grid_sample(x, g, padding_mode="wrap", align_corners=False)
        with pytest.raises(ValueError, match="Expected a batch of 2D affine matrices"):
            F.affine_grid(m.zeros(1, 3, 3), (1, 1, 2, 2), align_corners=False)
        with pytest.raises(ValueError, match="floating point type"):
            F.affine_grid(m.zeros(1, 2, 3, dtype=m.int64), (1, 1, 2, 2), align_corners=False)
        with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D"):
            F.grid_sample(m.zeros(1, 1, 2, 2, 2), m.zeros(1, 1, 1, 1, 3), mode="bicubic",
                          align_corners=False)
