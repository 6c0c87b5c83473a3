"""``repr`` of tensors in PyTorch's layout: ``tensor([1., 2.], requires_grad=True)``."""
import numpy as np

from ember.backend import dtypes as _dt

_PRINT = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print, as ``torch.set_printoptions``."""
    if profile == "default":
        _PRINT.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    elif profile == "short":
        _PRINT.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
    elif profile == "full":
        _PRINT.update(precision=4, threshold=float("inf"), edgeitems=3, linewidth=80)
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            _PRINT[k] = v
    _PRINT["sci_mode"] = sci_mode


class _Formatter:
    def __init__(self, values):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        p = _PRINT["precision"]
        if not self.floating:
            strs = [str(v) for v in values.ravel().tolist()] if values.size else [""]
            self.width = max(len(s) for s in strs)
            return
        finite = values[np.isfinite(values)].astype(np.float64)
        nonzero = np.abs(finite[finite != 0])
        if nonzero.size:
            self.int_mode = bool(np.all(finite == np.ceil(finite)))
            mx, mn = nonzero.max(), nonzero.min()
            if self.int_mode:
                self.sci_mode = mx / mn > 1000.0 or mx > 1.0e8
            else:
                self.sci_mode = mx / mn > 1000.0 or mx > 1.0e8 or mn < 1.0e-4
        if _PRINT["sci_mode"] is not None:
            self.sci_mode = _PRINT["sci_mode"]
        self.precision = p
        strs = [self._fmt(v) for v in values.astype(np.float64).ravel().tolist()] or [""]
        self.width = max(len(s) for s in strs)

    def _fmt(self, v):
        if not self.floating:
            return str(v)
        if v != v or v in (float("inf"), float("-inf")):
            return "nan" if v != v else ("inf" if v > 0 else "-inf")
        if self.sci_mode:
            return f"{v:.{self.precision}e}"
        if self.int_mode:
            return f"{v:.0f}."
        return f"{v:.{self.precision}f}"

    def format(self, v):
        if isinstance(v, bool):
            s = str(v)
        else:
            s = self._fmt(v)
        return s.rjust(self.width)


def _summarize(a, edge):
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * edge:
        a = np.concatenate([a[:edge], a[-edge:]])
    return np.stack([_summarize(s, edge) for s in a]) if a.ndim > 1 else a


def _body(a, fmt, indent, summarize):
    edge = _PRINT["edgeitems"]
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        items = [fmt.format(v) for v in a.tolist()]
        if summarize and a.shape[0] > 2 * edge:
            items = items[:edge] + ["..."] + items[-edge:]
        per_line = max(1, (_PRINT["linewidth"] - indent) // (fmt.width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = list(range(a.shape[0]))
    if summarize and a.shape[0] > 2 * edge:
        rows = rows[:edge] + [None] + rows[-edge:]
    parts = [_body(a[i], fmt, indent + 1, summarize) if i is not None else "..." for i in rows]
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def tensor_repr(t, prefix="tensor("):
    a = t._host()
    dt = t.dtype
    summarize = a.size > _PRINT["threshold"]
    vals = _summarize(a, _PRINT["edgeitems"]) if summarize else a
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if a.size == 0 and a.ndim != 1:
        body = "[]"
        suffixes.insert(0, f"size={tuple(a.shape)}")
    elif a.size == 0:
        body = "[]"
    else:
        body = _body(vals, _Formatter(vals), len(prefix), summarize)
    default_dt = _dt.get_default_dtype()
    if not (dt is default_dt or dt is _dt.int64 or dt is _dt.bool) or (
            a.size == 0 and dt is not default_dt):
        suffixes.append(f"dtype={dt!r}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return prefix + ", ".join([body] + suffixes) + ")"
