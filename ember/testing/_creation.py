"""``make_tensor``: a tensor of a given shape and dtype filled from ``[low, high)``."""
import math
import warnings

from ember import _core as ember
from ember.backend import dtypes as _dt

__all__ = ["make_tensor"]

_FLOATING = (_dt.float16, _dt.float32, _dt.float64)


def _low_high(dtype, low, high, lowest, highest, default_low, default_high, integral):
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and not integral:
        warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or complex "
                      "types is deprecated since 2.1 and will be removed in 2.3. Use "
                      "`torch.full(...)` instead.", FutureWarning, stacklevel=3)
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), "
                         f"but {dtype} only supports [{lowest}, {highest})")
    low = min(max(low, lowest), highest)
    high = min(max(high, lowest), highest)
    if integral:
        # randint's upper bound is exclusive, so both ends round up
        return math.ceil(low), math.ceil(high)
    return low, high


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` and ``dtype`` with values drawn uniformly from ``[low, high)``.

    Defaults are PyTorch's: ``[-9, 9)`` for floats, ``[-9, 10)`` for signed integers,
    ``[0, 10)`` for uint8 and ``[0, 2)`` for bool; bounds are clamped to the dtype's range.
    The values come from ember's generator, which follows PyTorch's CPU stream, so after
    the same ``manual_seed`` ember and PyTorch make the same tensor.

    >>> make_tensor(2, 3, dtype=ember.float32, device="cpu", low=-1, high=1).shape
    ember.Size([2, 3])
    """
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError("The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got noncontiguous={noncontiguous} and "
                         f"memory_format={memory_format}")
    integral = dtype == _dt.bool or not dtype.is_floating_point
    if dtype not in _FLOATING and not integral:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        "torch.testing.make_tensor().")
    if requires_grad and integral:
        raise ValueError("`requires_grad=True` is not supported for boolean and integral dtypes, "
                         f"but got dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        # twice the last dimension, then every other element: strided, with distinct values
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype == _dt.bool:
        low, high = _low_high(dtype, low, high, 0, 2, 0, 2, True)
        result = ember.randint(low, high, shape, device=device, dtype=dtype)
    elif integral:
        info = ember.iinfo(dtype)
        # randint's bounds travel as int64, so int64's maximum cannot be sampled
        highest = info.max + (1 if dtype != _dt.int64 else 0)
        low, high = _low_high(dtype, low, high, info.min, highest, -9, 10, True)
        result = ember.randint(low, high, shape, device=device, dtype=dtype)
    else:
        info = ember.finfo(dtype)
        low, high = _low_high(dtype, low, high, info.min, info.max, -9, 9, False)
        result = ember.empty(shape, device=device, dtype=dtype)
        if high - low >= info.max:
            # uniform_ needs high - low to be finite: draw half the range and double it
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    if noncontiguous:
        # starting at 1 also catches offset bugs
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if integral else ember.finfo(dtype).tiny
    if not integral:
        result.requires_grad = requires_grad
    return result
