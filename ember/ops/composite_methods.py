"""Tensor methods (and in-place variants) PyTorch has for ops ember declares as
functions elsewhere (``ember.ops.extras``, ``ember.linalg``), and ATen's integer-coded
``grid_sampler_2d``/``3d`` entry points over ``F.grid_sample``."""
from ember._tensor import Tensor
from ember.ops import extras
from ember.ops._inplace import inplace_method

__all__ = ["grid_sampler_2d", "grid_sampler_3d", "grid_sampler"]

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """``F.grid_sample`` with PyTorch's integer codes: ``interpolation_mode`` 0 bilinear,
    1 nearest, 2 bicubic; ``padding_mode`` 0 zeros, 1 border, 2 reflection."""
    from ember.ops.grid_sample import grid_sample
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


def _bind():
    import ember.linalg
    for name in ("heaviside", "gcd", "lcm", "ldexp", "frexp", "nextafter", "bincount", "histc",
                 "cov", "corrcoef", "diagflat", "dist", "renorm"):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, getattr(extras, name))
    for name in ("heaviside", "gcd", "lcm", "ldexp", "nextafter", "renorm"):
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", inplace_method(getattr(extras, name)))
    if not hasattr(Tensor, "orgqr"):
        Tensor.orgqr = ember.linalg.householder_product


_bind()
