"""Spatial transformers: ``affine_grid`` and ``grid_sample`` (PyTorch's
``torch.nn.functional`` versions), 2-D and 3-D, bilinear / nearest / bicubic, with
zeros / border / reflection padding.

Both are composites of differentiable ember ops (gather, floor, clamp, arithmetic), so
their first and second derivatives with respect to the input and the grid come from
those ops' formulas, with no derivative code here. The sampling follows PyTorch's CPU
kernel step by step: unnormalize the grid to pixel coordinates, apply the padding rule
to the coordinates, then mix the neighbouring pixels (pixels outside the input read as
zero).
"""
import itertools
import math
import warnings

from ember._factory import linspace, ones, zeros, zeros_like
from ember.ops._util import int_arg, reduced_float
from ember.ops.composite_node import CompositeNode, call, named_nodes
from ember.ops.elementwise import fmod, where
from ember.ops.join import meshgrid, stack
from ember.ops.linalg import bmm
from ember.ops.shape import Size
from ember.ops.unary import floor
from ember.ops.unary import round as _round

__all__ = ["affine_grid", "grid_sample", "grid_sampler", "grid_sampler_2d",
           "grid_sampler_3d"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


def _base_coords(steps, align_corners, dtype, device):
    """PyTorch's ``linspace_from_neg_one``: pixel centres in [-1, 1]."""
    if steps <= 1:
        return zeros(1, dtype=dtype, device=device)
    r = linspace(-1, 1, steps, dtype=dtype, device=device)
    if not align_corners:
        r = r * (steps - 1) / steps
    return r


class AffineGridGenerator(CompositeNode):
    """``F.affine_grid``: PyTorch's one node over ``theta``."""
    save_inputs = (0,)

    @staticmethod
    def composite(theta, size, spatial, align_corners):
        return _affine_grid(theta, size, spatial, align_corners)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps ``theta`` (N, 2, 3) for an output of
    ``size`` (N, C, H, W), or ``theta`` (N, 3, 4) for (N, C, D, H, W): the
    result is (N, H, W, 2) (or (N, D, H, W, 3)) with x first, for ``grid_sample``."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size)
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError("Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{Size(size)}. Got {theta.shape}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError("Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{Size(size)}. Got {theta.shape}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    return call(AffineGridGenerator, theta, tuple(size), tuple(spatial), align_corners)


def _affine_grid(theta, size, spatial, align_corners):
    n, nd = size[0], len(spatial)
    dt, dev = theta.dtype, theta.device
    # coordinate k of the grid runs along spatial dim nd-1-k (x along the last dim)
    axes = [_base_coords(s, align_corners, dt, dev) for s in spatial]
    mesh = meshgrid(*axes, indexing="ij")
    cols = [mesh[nd - 1 - k] for k in range(nd)] + [ones(spatial, dtype=dt, device=dev)]
    base = stack(cols, dim=-1).reshape(1, -1, nd + 1).expand(n, -1, -1)
    grid = bmm(base, theta.transpose(1, 2))
    return grid.reshape(n, *spatial, nd)


def _unnormalize(c, size, align_corners):
    if align_corners:
        return (c + 1) / 2 * (size - 1)
    return ((c + 1) * size - 1) / 2


def _reflect(c, twice_low, twice_high):
    if twice_low == twice_high:
        return zeros_like(c)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = (c - low).abs()
    extra = fmod(c, span)
    flips = floor(c / span).detach()
    return where(flips % 2 == 0, extra + low, span - extra + low)


def _pad_coords(c, size, padding_mode, align_corners):
    """Border and reflection padding act on coordinates, before any pixel is read."""
    if padding_mode == "border":
        return c.clamp(0, size - 1)
    if padding_mode == "reflection":
        if align_corners:
            c = _reflect(c, 0, 2 * (size - 1))
        else:
            c = _reflect(c, -1, 2 * size - 1)
        return c.clamp(0, size - 1)
    return c


class _Reader:
    """Reads input pixels at integer coordinates, zero outside the input."""

    def __init__(self, input, out_spatial):
        self.n, self.c = input.shape[0], input.shape[1]
        self.sizes = list(input.shape[2:])
        self.flat = input.reshape(self.n, self.c, math.prod(input.shape[2:]))  # n may be 0
        self.out_spatial = out_spatial

    def read(self, idx):
        """``idx``: one float tensor of integer coordinates (N, P) per spatial dim,
        slowest first. Returns (N, C, P)."""
        valid = None
        linear = None
        for i, s in zip(idx, self.sizes):
            ok = (i >= 0) & (i <= s - 1)
            valid = ok if valid is None else valid & ok
            ii = i.clamp(0, s - 1).long()
            linear = ii if linear is None else linear * s + ii
        gathered = self.flat.gather(2, linear.unsqueeze(1).expand(self.n, self.c, -1))
        # a point outside reads 0 (not 0 * the clamped pixel, NaN where that is inf)
        zero = zeros((), dtype=gathered.dtype, device=gathered.device)
        return where(valid.unsqueeze(1), gathered, zero)


def _cubic_coeffs(t):
    a = -0.75

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


class _GridSampler(CompositeNode):
    """``F.grid_sample``: PyTorch's one node (per rank) over the input and the grid."""
    save_inputs = (0, 1)

    @staticmethod
    def composite(input, grid, mode, padding_mode, align_corners):
        low = input.dtype
        if reduced_float(low) and grid.dtype == low:
            # float16/bfloat16: the weights and sums in float32, rounded once (PyTorch's
            # kernels compute each step in float32; rounding each one here loses more)
            return _grid_sample(input.float(), grid.float(), mode, padding_mode,
                                align_corners).to(low)
        return _grid_sample(input, grid, mode, padding_mode, align_corners)


_GRID_SAMPLERS = named_nodes(_GridSampler, {2: "GridSampler2DBackward0",
                                            3: "GridSampler3DBackward0"}, __name__,
                            aten=lambda d: f"aten::grid_sampler_{d}d")


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) at the points of ``grid`` (N, Ho, Wo, 2), given in
    [-1, 1] with x first; 5-D inputs take (N, Do, Ho, Wo, 3) grids. ``mode`` is
    'bilinear', 'nearest' or 'bicubic' (4-D only); ``padding_mode`` 'zeros', 'border' or
    'reflection'. Differentiable in ``input`` and ``grid`` (first and second order)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    nd = input.dim() - 2
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        raise RuntimeError("grid_sampler(): expected 4D or 5D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(input.shape)} and "
                           f"grid with sizes {list(grid.shape)}")
    if grid.shape[0] != input.shape[0]:
        raise RuntimeError("grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd} in last dimension, "
                           f"but got grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and nd != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.dtype != grid.dtype:
        raise RuntimeError("grid_sampler(): expected input and grid to have same dtype, but "
                           f"input has {input.dtype} and grid has {grid.dtype}")
    return call(_GRID_SAMPLERS[nd], input, grid, mode, padding_mode, align_corners)


def _grid_sample(input, grid, mode, padding_mode, align_corners):
    nd = input.dim() - 2
    n = input.shape[0]
    out_spatial = list(grid.shape[1:-1])
    g = grid.reshape(n, math.prod(out_spatial), nd)  # explicit: n may be 0
    reader = _Reader(input, out_spatial)
    sizes = reader.sizes
    # coordinates per spatial dim, slowest (depth/height) first; the grid lists x first
    coords = [_unnormalize(g[..., nd - 1 - s], sizes[s], align_corners) for s in range(nd)]
    if mode == "bicubic":
        out = _bicubic(reader, coords, padding_mode, align_corners)
    else:
        coords = [_pad_coords(c, s, padding_mode, align_corners) for c, s in zip(coords, sizes)]
        if mode == "nearest":
            out = reader.read([_round(c).detach() for c in coords])
            # the grid's gradient is zero, not absent, as in PyTorch: an exact zero that
            # depends on the grid through round (whose derivative is 0)
            link = sum((_round(c) * 0).nan_to_num(0.0, 0.0, 0.0) for c in coords)
            out = out + link.unsqueeze(1)
        else:
            lows = [floor(c).detach() for c in coords]
            fracs = [c - lo for c, lo in zip(coords, lows)]
            out = None
            for corner in itertools.product((0, 1), repeat=nd):
                w = None
                for bit, f in zip(corner, fracs):
                    wi = f if bit else 1 - f
                    w = wi if w is None else w * wi
                term = reader.read([lo + bit for lo, bit in zip(lows, corner)]) * w.unsqueeze(1)
                # PyTorch's 3-D kernel adds the corners to +0.0 (its 2-D one does not)
                out = (term + 0.0 if nd == 3 else term) if out is None else out + term
    return out.reshape(n, input.shape[1], *out_spatial)


def _bicubic(reader, coords, padding_mode, align_corners):
    (sy, sx), (cy, cx) = reader.sizes, coords
    y0, x0 = floor(cy).detach(), floor(cx).detach()
    wy, wx = _cubic_coeffs(cy - y0), _cubic_coeffs(cx - x0)
    out = None
    for i in range(4):
        yy = _pad_coords(y0 + (i - 1), sy, padding_mode, align_corners).detach()
        for j in range(4):
            xx = _pad_coords(x0 + (j - 1), sx, padding_mode, align_corners).detach()
            term = reader.read([yy, xx]) * (wy[i] * wx[j]).unsqueeze(1)
            out = term if out is None else out + term
    return out


# ATen's integer-coded entry points over grid_sample (ember.ops.grid_sampler*; the top
# level ember.grid_sampler* are ember.nn._aten_ops' forms)
_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """``F.grid_sample`` with PyTorch's integer codes: ``interpolation_mode`` 0 bilinear,
    1 nearest, 2 bicubic; ``padding_mode`` 0 zeros, 1 border, 2 reflection."""
    from ember.ops.grid_sample import grid_sample
    interpolation_mode, padding_mode = int_arg(interpolation_mode), int_arg(padding_mode)
    if interpolation_mode not in range(3) or padding_mode not in range(3):
        raise RuntimeError(f"grid_sampler(): expected interpolation_mode and padding_mode in "
                           f"0..2, got {interpolation_mode} and {padding_mode}")
    return grid_sample(input, grid, _MODES[interpolation_mode], _PADDINGS[padding_mode],
                       bool(align_corners))


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """``grid_sampler`` of a 4-D input."""
    if input.dim() != 4:
        raise RuntimeError(f"grid_sampler_2d(): expected 4D input, but got input with sizes "
                           f"{list(input.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """``grid_sampler`` of a 5-D input."""
    if input.dim() != 5:
        raise RuntimeError(f"grid_sampler_3d(): expected 5D input, but got input with sizes "
                           f"{list(input.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)
