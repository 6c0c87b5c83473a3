"""``assert_close``: compare tensors, numbers and nested containers of them the way
``torch.testing.assert_close`` does, with its tolerances per dtype and its report."""
import cmath
import collections.abc
import warnings

import numpy as np

from ember import _core as ember
from ember.backend import dtypes as _dt

__all__ = ["assert_close", "assert_allclose"]

# PyTorch's default (rtol, atol) per dtype; any other dtype compares exactly
_PRECISIONS = {_dt.float16: (0.001, 1e-5), _dt.float32: (1.3e-6, 1e-5), _dt.float64: (1e-7, 1e-7)}
# Python numbers compare at the tolerance of the dtype torch would give them
_NUMBER_DTYPES = {int: _dt.int64, float: _dt.float64, complex: None}


class _Mismatch(Exception):
    """A failed comparison: the exception type to raise, its message and the item path."""

    def __init__(self, exc_type, msg, path=()):
        super().__init__(msg)
        self.exc_type, self.msg, self.path = exc_type, msg, path

    def to_error(self, msg=None):
        if isinstance(msg, str):
            return self.exc_type(msg)
        text = self.msg
        if self.path:
            text += "\n\nThe failure occurred for item " + "".join(str([p]) for p in self.path)
        return self.exc_type(msg(text) if callable(msg) else text)


def _tolerances(dtypes, rtol, atol, path):
    if (rtol is None) != (atol is None):
        raise _Mismatch(ValueError, "Both 'rtol' and 'atol' must be either specified or omitted, "
                        f"but got no {'rtol' if rtol is None else 'atol'}.", path)
    if rtol is not None:
        return rtol, atol
    pairs = [_PRECISIONS.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _report(identifier, extra, abs_diff, abs_idx, rel_diff, rel_idx, rtol, atol):
    exact = rtol == 0 and atol == 0
    lines = [f"{identifier} are not {'equal' if exact else 'close'}!", ""]
    if extra:
        lines.append(extra)
    for kind, diff, idx, tol in (("absolute", abs_diff, abs_idx, atol),
                                 ("relative", rel_diff, rel_idx, rtol)):
        line = (f"{kind.title()} difference: {diff}" if idx is None
                else f"Greatest {kind} difference: {diff} at index {idx}")
        lines.append(line + ("" if exact else f" (up to {tol} allowed)"))
    return "\n".join(lines)


def _scalar_report(actual, expected, rtol, atol):
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _report("Scalars", f"Expected {expected} but got {actual}.", abs_diff, None,
                   rel_diff, None, rtol, atol)


def _compare_numbers(actual, expected, path, rtol, atol, equal_nan, check_dtype, **_):
    actual, expected = (v.item() if isinstance(v, np.number) else v for v in (actual, expected))
    rtol, atol = _tolerances([_NUMBER_DTYPES[type(v)] for v in (actual, expected)], rtol, atol,
                             path)
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != "
                        f"{type(expected)}.", path)
    if actual == expected:
        return
    if equal_nan and cmath.isnan(actual) and cmath.isnan(expected):
        return
    diff = abs(actual - expected)
    if cmath.isfinite(diff) and diff <= atol + rtol * abs(expected):
        return
    raise _Mismatch(AssertionError, _scalar_report(actual, expected, rtol, atol), path)


def _isclose(a, b, rtol, atol, equal_nan):
    if a.dtype.kind in "biu" or (rtol == 0 and atol == 0):
        close = a == b
    else:
        with np.errstate(all="ignore"):
            close = (a == b) | (np.isfinite(a) & np.isfinite(b)
                                & (np.abs(a - b) <= atol + rtol * np.abs(b)))
    if equal_nan and a.dtype.kind == "f":
        close |= np.isnan(a) & np.isnan(b)
    return close


def _unravel(flat, shape):
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _tensor_report(a, b, matches, rtol, atol):
    total, bad = matches.size, matches.size - int(matches.sum())
    extra = f"Mismatched elements: {bad} / {total} ({bad / total:.1%})"
    a, b, m = a.reshape(-1), b.reshape(-1), matches.reshape(-1)
    if a.dtype.kind in "biu":
        a, b = a.astype(np.int64), b.astype(np.int64)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(a - b)
        abs_diff[m] = 0
        denom = np.abs(b)
        if abs_diff.dtype.kind == "i":
            # torch divides integers in its default float dtype
            rel = abs_diff.astype(np.float32) / denom.astype(np.float32)
        else:
            rel = abs_diff / denom
    rel[m] = 0
    # torch.max picks the first maximum and lets NaN win
    ia, ir = (int(np.argmax(np.isnan(d) if np.isnan(d).any() else d)) for d in (abs_diff, rel))
    return _report("Tensor-likes", extra, abs_diff[ia].item(), _unravel(ia, matches.shape),
                   rel[ir].item(), _unravel(ir, matches.shape), rtol, atol)


def _as_tensor(value):
    if isinstance(value, ember.Tensor):
        return value
    try:
        return ember.as_tensor(value)
    except Exception:
        return None


def _compare_tensors(actual, expected, path, rtol, atol, equal_nan, check_device, check_dtype,
                     check_layout, check_stride, allow_subclasses):
    if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
        return False
    if not allow_subclasses and type(actual) is not type(expected):
        return False
    a, b = _as_tensor(actual), _as_tensor(expected)
    if a is None or b is None:
        return False
    rtol, atol = _tolerances([a.dtype, b.dtype], rtol, atol, path)

    def mismatch(attr, x, y):
        raise _Mismatch(AssertionError,
                        f"The values for attribute '{attr}' do not match: {x} != {y}.", path)
    if a.shape != b.shape:
        mismatch("shape", a.shape, b.shape)
    if a.layout != b.layout:
        if check_layout:
            mismatch("layout", a.layout, b.layout)
    elif check_stride and a.stride() != b.stride():
        mismatch("stride()", a.stride(), b.stride())
    if check_device and a.device != b.device:
        mismatch("device", a.device, b.device)
    if check_dtype and a.dtype != b.dtype:
        mismatch("dtype", a.dtype, b.dtype)
    a, b = (t.to_dense() if t.layout != ember.strided else t for t in (a, b))
    if a.dtype != b.dtype:
        common = ember.promote_types(a.dtype, b.dtype)
        a, b = a.to(common), b.to(common)
    x, y = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    matches = _isclose(x, y, rtol, atol, equal_nan)
    if matches.all():
        return True
    if x.ndim == 0:
        msg = _scalar_report(x.item(), y.item(), rtol, atol)
    else:
        msg = _tensor_report(x, y, matches, rtol, atol)
    raise _Mismatch(AssertionError, msg, path)


def _pairs(actual, expected, path):
    """Walk nested sequences and mappings together, yielding the leaves to compare."""
    seq = collections.abc.Sequence
    if (isinstance(actual, seq) and not isinstance(actual, str)
            and isinstance(expected, seq) and not isinstance(expected, str)):
        if len(actual) != len(expected):
            raise _Mismatch(AssertionError, "The length of the sequences mismatch: "
                            f"{len(actual)} != {len(expected)}", path)
        for i in range(len(actual)):
            yield from _pairs(actual[i], expected[i], (*path, i))
    elif isinstance(actual, collections.abc.Mapping) and isinstance(expected,
                                                                    collections.abc.Mapping):
        ka, kb = set(actual.keys()), set(expected.keys())
        if ka != kb:
            raise _Mismatch(AssertionError, "The keys of the mappings do not match:\n"
                            f"Missing keys in the actual mapping: {sorted(kb - ka)}\n"
                            f"Additional keys in the actual mapping: {sorted(ka - kb)}", path)
        try:
            keys = sorted(ka)
        except TypeError:
            keys = list(ka)
        for k in keys:
            yield from _pairs(actual[k], expected[k], (*path, k))
    else:
        yield actual, expected, path


def _compare(actual, expected, path, options):
    if actual is None and expected is None:
        return
    if actual is None or expected is None:
        raise _Mismatch(TypeError, "No comparison pair was able to handle inputs of type "
                        f"{type(actual)} and {type(expected)}.", path)
    bools = (bool, np.bool_)
    if isinstance(actual, bools) and isinstance(expected, bools):
        if bool(actual) is not bool(expected):
            raise _Mismatch(AssertionError, f"Booleans mismatch: {bool(actual)} is not "
                            f"{bool(expected)}", path)
        return
    numbers = (int, float, complex, np.number)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        _compare_numbers(actual, expected, path, **options)
        return
    if _compare_tensors(actual, expected, path, **options) is False:
        raise _Mismatch(TypeError, "No comparison pair was able to handle inputs of type "
                        f"{type(actual)} and {type(expected)}.", path)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Assert that ``actual`` and ``expected`` are close, as ``torch.testing.assert_close``.

    Tensors must match in shape, device and dtype (``check_dtype=False`` promotes both
    to a common dtype instead); values are close when
    ``|actual - expected| <= atol + rtol * |expected|``. Without ``rtol``/``atol`` the
    tolerances are PyTorch's for the dtype (float16 1e-3/1e-5, float32 1.3e-6/1e-5,
    float64 1e-7/1e-7, exact for integers and bool). Sequences and mappings are compared
    item by item. A mismatch raises ``AssertionError`` with PyTorch's report (the number
    of mismatched elements and the greatest absolute and relative differences); ``msg``
    (a string, or a callable taking the generated message) replaces it.

    >>> assert_close(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.0 + 1e-7]))
    """
    __tracebackhide__ = True
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                   check_dtype=check_dtype, check_layout=check_layout, check_stride=check_stride,
                   allow_subclasses=allow_subclasses)
    try:
        pairs = list(_pairs(actual, expected, ()))
        first = None
        for a, e, path in pairs:
            try:
                _compare(a, e, path, options)
            except _Mismatch as m:
                first = first or m
    except _Mismatch as m:
        raise m.to_error() from None
    if first is not None:
        raise first.to_error(msg) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated ``torch.testing.assert_allclose``: looser defaults, dtypes may differ."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed "
                  "in a future release. Please use `torch.testing.assert_close()` instead.",
                  FutureWarning, stacklevel=2)
    if not isinstance(actual, ember.Tensor):
        actual = ember.tensor(actual)
    if not isinstance(expected, ember.Tensor):
        expected = ember.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        loose = {_dt.float16: (1e-3, 1e-3), _dt.float32: (1e-4, 1e-5), _dt.float64: (1e-5, 1e-8)}
        pairs = [loose.get(d, (0.0, 0.0)) for d in (actual.dtype, expected.dtype)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, check_stride=False, msg=msg or None)
