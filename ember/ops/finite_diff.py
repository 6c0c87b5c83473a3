"""``torch.gradient``: derivatives estimated by finite differences, a composite of
slicing and arithmetic (differentiable, no derivative code of its own)."""
import numbers

from ember._tensor import Tensor, _mode_active
from ember.ops._util import traced_ints, wrap_dim

__all__ = ["gradient"]


def _sl(t, d, start, stop=None):
    return t[(slice(None),) * d + (slice(start, stop),)]


def _uniform(f, d, h, edge_order):
    """Central differences inside, one-sided (order 1 or 2) at the edges, spacing ``h``."""
    import ember
    inner = (_sl(f, d, 2) - _sl(f, d, 0, -2)) / (2 * h)
    if edge_order == 1:
        first = (_sl(f, d, 1, 2) - _sl(f, d, 0, 1)) / h
        last = (_sl(f, d, -1) - _sl(f, d, -2, -1)) / h
    else:
        first = (-1.5 * _sl(f, d, 0, 1) + 2 * _sl(f, d, 1, 2) - 0.5 * _sl(f, d, 2, 3)) / h
        last = (0.5 * _sl(f, d, -3, -2) - 2 * _sl(f, d, -2, -1) + 1.5 * _sl(f, d, -1)) / h
    return ember.cat([first, inner, last], d)


def _coords(f, d, x, edge_order):
    """The same with sample coordinates ``x`` (a 1-D tensor): second-order accurate
    weights for uneven spacing inside."""
    import ember
    shape = [1] * f.dim()
    shape[d] = -1

    def along(t):
        return t.reshape(shape)

    dx = x[1:] - x[:-1]
    a, b = dx[:-1], dx[1:]  # spacing to the left and right of each inner point
    wl = along(-b / (a * (a + b)))
    wc = along((b - a) / (a * b))
    wr = along(a / (b * (a + b)))
    inner = wl * _sl(f, d, 0, -2) + wc * _sl(f, d, 1, -1) + wr * _sl(f, d, 2)
    if edge_order == 1:
        first = (_sl(f, d, 1, 2) - _sl(f, d, 0, 1)) / dx[0]
        last = (_sl(f, d, -1) - _sl(f, d, -2, -1)) / dx[-1]
    else:
        a, b = dx[0], dx[1]
        first = (-(2 * a + b) / (a * (a + b)) * _sl(f, d, 0, 1) + (a + b) / (a * b) *
                 _sl(f, d, 1, 2) - a / (b * (a + b)) * _sl(f, d, 2, 3))
        a, b = dx[-2], dx[-1]
        last = (b / (a * (a + b)) * _sl(f, d, -3, -2) - (a + b) / (a * b) *
                _sl(f, d, -2, -1) + (2 * b + a) / (b * (a + b)) * _sl(f, d, -1))
    return ember.cat([first, inner, last], d)


def gradient(input, *, spacing=None, dim=None, edge_order=1):
    """One tensor per dim in ``dim`` (all dims by default): the derivative of ``input``
    along it by finite differences (central inside, one-sided of order ``edge_order``
    at the ends).

    ``spacing`` is one number for every dim, one number per dim, or one 1-D tensor
    of sample coordinates per dim.
    """
    if _mode_active[0] and (r := traced_ints(spacing, dim, edge_order)) is not None:
        # a traced spacing, dim or order is used in Python: the call is one node
        return r[0].composite("gradient", gradient, (input,),
                              dict(zip(("spacing", "dim", "edge_order"), r[1])))
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if input.dim() == 0:
        raise RuntimeError("torch.gradient expected each tensor to have at least one "
                           "dimension")
    if dim is None:
        dims = list(range(input.dim()))
    elif isinstance(dim, numbers.Integral):
        dims = [wrap_dim(dim, input.dim())]
    else:
        dims = [wrap_dim(d, input.dim()) for d in dim]
        for k, d in enumerate(dims):
            if d in dims[:k]:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    if spacing is None:
        spacing = 1
    if isinstance(spacing, (numbers.Number, Tensor)) and not (
            isinstance(spacing, Tensor) and spacing.dim() == 1):
        if isinstance(spacing, Tensor) and _mode_active[0]:
            # the step becomes a Python number: a compiled graph would replay it
            from ember._graph.capture import branch_on_values
            branch_on_values(spacing, "gradient's spacing")
        spacing = [spacing.item() if isinstance(spacing, Tensor) else spacing] * len(dims)
    spacing = list(spacing)
    if dim is None and len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a "
                           f"list of length equal to 'self.dim() = {input.dim()}', since dim "
                           f"argument was not given, but got a list of length {len(spacing)}")
    if len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's "
                           f"spacing and dim arguments to have the same length, but got a spacing "
                           f"argument of length {len(spacing)} and a dim argument of length "
                           f"{len(dims)}.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    f = input if input.is_floating_point() or input.is_complex() else input.to(
        __import__("ember").get_default_dtype())
    out = []
    for d, h in zip(dims, spacing):
        if isinstance(h, Tensor):
            if h.dim() != 1 or h.shape[0] != input.shape[d]:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same "
                                   f"device and to have size {input.shape[d]} along dim {d}")
            out.append(_coords(f, d, h.to(f.dtype) if h.dtype != f.dtype else h, edge_order))
        else:
            out.append(_uniform(f, d, h, edge_order))
    return tuple(out)
