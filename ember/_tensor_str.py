"""``repr`` of tensors, character for character as PyTorch prints them.

A port of ``torch/_tensor_str.py`` onto NumPy arrays: one formatter per tensor
(integer mode, fixed point or scientific, chosen from the finite nonzero
values), summarisation with ``...`` past ``threshold`` elements, lines wrapped at
``linewidth``, and the suffixes (``device=``, ``dtype=``, ``grad_fn=`` or
``requires_grad=True``) wrapped the same way.
"""
import contextlib
import dataclasses
import math

import numpy as np

from ember.backend import dtypes as _dt

__all__ = ["set_printoptions", "get_printoptions", "printoptions", "tensor_repr"]


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: object = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print (``torch.set_printoptions``).

    ``profile`` is one of ``"default"``, ``"short"``, ``"full"``; the other arguments
    override it. ``sci_mode=None`` lets each tensor choose scientific notation.

        >>> ember.set_printoptions(precision=2)
        >>> ember.tensor([1.12345])
        tensor([1.12])
        >>> ember.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile == "default":
            PRINT_OPTS.precision, PRINT_OPTS.threshold = 4, 1000
            PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 3, 80
        elif profile == "short":
            PRINT_OPTS.precision, PRINT_OPTS.threshold = 2, 1000
            PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 2, 80
        elif profile == "full":
            PRINT_OPTS.precision, PRINT_OPTS.threshold = 4, math.inf
            PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 3, 80
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options as a dict that ``set_printoptions(**d)`` accepts."""
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Context manager that sets print options for its block."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    def __init__(self, a):
        self.floating_dtype = a.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = a.reshape(-1)
        if not self.floating_dtype:
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
            return
        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:
            return
        absvals = np.abs(vals).astype(np.float64)
        mn, mx = absvals.min(), absvals.max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        p = PRINT_OPTS.precision
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = bool(mx / mn > 1000.0 or mx > 1.0e8 or mn < 1.0e-4)
        else:
            self.sci_mode = PRINT_OPTS.sci_mode
        values = vals.tolist()
        if self.sci_mode:
            width = max(len(f"{v:.{p}e}") for v in values)
        elif self.int_mode:
            width = max(len(f"{v:.0f}") for v in values) + 1
        else:
            width = max(len(f"{v:.{p}f}") for v in values)
        self.max_width = max(self.max_width, width)

    def width(self):
        return self.max_width

    def format(self, value):
        p = PRINT_OPTS.precision
        if self.floating_dtype:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


class _ComplexFormatter:
    """Complex elements: the real and imaginary parts each get a formatter of their own."""

    def __init__(self, a):
        self.re, self.im = _Formatter(a.real), _Formatter(a.imag)

    def width(self):
        return self.re.width() + self.im.width() + 1  # the "j"

    def format(self, value):
        re = self.re.format(value.real)
        im = (self.im.format(value.imag) + "j").lstrip()
        return re + im if im[0] in "+-" else re + "+" + im


def _vector_str(a, indent, summarize, fmt):
    element_length = fmt.width() + 2
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / element_length))
    edge = PRINT_OPTS.edgeitems
    if summarize and not edge:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * edge:
        data = ([fmt.format(v) for v in a[:edge].tolist()] + [" ..."]
                + [fmt.format(v) for v in a[-edge:].tolist()])
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(a, indent, summarize, fmt):
    dim = a.ndim
    if dim == 0:
        return fmt.format(a.item())
    if dim == 1:
        return _vector_str(a, indent, summarize, fmt)
    edge = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * edge:
        slices = ([_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt)
                   for i in range(edge)] + ["..."]
                  + [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt)
                     for i in range(a.shape[0] - edge, a.shape[0])])
    else:
        slices = [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt)
                  for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(slices) + "]"


def _summarized_data(a):
    edge = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        if a.shape[0] > 2 * edge:
            return np.concatenate((a[:edge], a[-edge:]))
        return a
    if not edge:
        return np.empty((0,) * a.ndim, dtype=a.dtype)
    if a.shape[0] > 2 * edge:
        rows = list(range(edge)) + list(range(a.shape[0] - edge, a.shape[0]))
    else:
        rows = range(a.shape[0])
    return np.stack([_summarized_data(a[i]) for i in rows])


def _tensor_str(a, indent):
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTS.threshold
    data = _summarized_data(a) if summarize else a
    fmt = _ComplexFormatter(data) if a.dtype.kind == "c" else _Formatter(data)
    return _tensor_str_with_formatter(a, indent, summarize, fmt)


def _add_suffixes(tensor_str, suffixes, indent, force_newline=False):
    parts = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if force_newline or last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
            force_newline = False
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t, tensor_contents=None):
    """The text ``repr(t)`` shows, as PyTorch's with ``ember`` for ``torch``."""
    from ember._factory import get_default_device
    from ember._tensor import Tensor
    plain = type(t) is Tensor or type(t).__name__ == "Parameter"
    prefix = "tensor(" if plain else f"{type(t).__name__}("
    indent = len(prefix)
    suffixes = []
    dev = t.device
    if dev.type != get_default_device().type or (dev.type == "cuda" and (dev.index or 0) != 0):
        suffixes.append(f"device='{dev}'")
    dt = t.dtype
    default_dt = _dt.get_default_dtype()
    if t.is_meta:
        # no values to show: PyTorch's "..." with the size (and a dtype other than the
        # default float)
        suffixes.append(f"size={tuple(t.shape)}")
        if dt is not default_dt:
            suffixes.append(f"dtype={dt!r}")
        tensor_contents = "..." if tensor_contents is None else tensor_contents
        a = None
    else:
        a = t._host_numbers()
    if a is None:
        tensor_str = "..."
    elif a.size == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        if dt is not default_dt:
            suffixes.append(f"dtype={dt!r}")
        tensor_str = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(a.shape)}")
        if dt not in (default_dt, _dt.int64, _dt.bool, _dt._TO_COMPLEX.get(default_dt)):
            suffixes.append(f"dtype={dt!r}")
        tensor_str = _tensor_str(a, indent)
    if tensor_contents is not None:
        tensor_str = tensor_contents
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name().rsplit('::', 1)[-1]}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + tensor_str, suffixes, indent)
