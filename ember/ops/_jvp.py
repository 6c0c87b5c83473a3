"""The common shapes of forward-mode (JVP) rules, for ops to declare beside their backward.

An op's ``jvp(self, *tangents)`` receives one tangent per positional input (None where the
input has none) and reads its primals from ``self.fw_inputs``, ``self.fw_params`` and
``self.fw_output`` (see ``Primitive.jvp`` and ``autograd.forward_ad``). Most ops fall in
one of three shapes:

- ``linear(*positions)``: the op is linear in the inputs at ``positions`` (views, sums,
  gathers, concatenation, padding...): the tangent is the op applied to the tangents.
- ``multilinear(i, j)``: linear in each of two inputs (products: ``mul``, ``matmul``,
  ``einsum``): ``op(ta, b) + op(a, tb)``.
- ``reduced``/``picked``: reductions (see each).
- ``diagonal``: elementwise ops of real tensors. Their Jacobian is diagonal, hence its own
  transpose, so the tangent is the op's backward formula applied to the tangent (broadcast
  to the output) — one formula evaluation, no second pass. Complex inputs use the
  double-vjp fallback (a diagonal complex Jacobian need not be symmetric under
  conjugation: ``abs``, ``angle``).
"""
from ember._tensor import Tensor

_new = object.__new__


def _zeros_like(a):
    from ember import zeros_like
    return zeros_like(a)


def linear(*positions):
    """A JVP rule for an op linear in the inputs at ``positions`` (all Tensor inputs when
    none are named): the op applied to their tangents (zeros where one has none)."""
    def jvp(self, *tangents):
        args = list(self.fw_inputs)
        pos = positions or range(len(args))
        if all(p >= len(tangents) or tangents[p] is None for p in pos):
            return None
        for p in pos:
            if p >= len(args):
                continue
            a = args[p]
            if isinstance(a, Tensor):
                t = tangents[p]
                args[p] = _zeros_like(a) if t is None else t
            elif positions and type(a) in (int, float, complex):
                args[p] = type(a)(0)  # a constant term (a fill value): no tangent
        return type(self).apply(*args, **self.fw_params)
    jvp.__doc__ = f"Linear in inputs {positions or 'all'}: the op applied to the tangents."
    return jvp


def multilinear(*positions):
    """A JVP rule for an op linear in each input at ``positions`` separately (all Tensor
    inputs when none are named; the others held fixed): ``op(ta, b) + op(a, tb)``."""
    def jvp(self, *tangents):
        args = self.fw_inputs
        out = None
        for p in positions or range(len(args)):
            t = tangents[p] if p < len(tangents) else None
            if t is None:
                continue
            a = list(args)
            a[p] = t
            r = type(self).apply(*a, **self.fw_params)
            out = r if out is None else out + r
        return out
    jvp.__doc__ = f"Linear in each of inputs {positions or 'all'} separately."
    return jvp


def _complex(self):
    out = self.fw_output
    return any(isinstance(a, Tensor) and a._data.dtype.kind == "c"
               for a in (out if type(out) is tuple else (out,)) + tuple(self.fw_inputs))


def _fallback(self, tangents):
    from ember.autograd.forward_ad import fallback_jvp
    return fallback_jvp(self, tangents)


def through_backward(self, i, gy):
    """Input ``i``'s gradient for output gradient ``gy``, from the op's own backward formula
    run on a copy of the node (so the node in the graph keeps its state)."""
    cls = type(self)
    args = self.fw_inputs
    out = self.fw_output
    n = _new(cls)
    n.__dict__.update(self.__dict__)
    n._edges = tuple(True if k == i else None for k in range(len(args)))
    n._saved = [(args[k], None) for k in cls.save_inputs]
    if cls.save_output:
        n._saved.append((out, None))
    g = n.backward(gy)
    if type(g) is tuple or type(g) is list:
        g = g[i]
    return g


def diagonal(self, *tangents):
    """An op whose Jacobian is its own transpose — elementwise ops of real tensors (a
    diagonal Jacobian), softmax — : ``sum_i backward_i(t_i)`` (see the module docstring)."""
    if _complex(self):
        return _fallback(self, tangents)
    out = self.fw_output
    total = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        if t._data.shape != out._data.shape:
            t = t.expand(out.shape)
        if t._data.dtype != out._data.dtype:
            t = t.to(out.dtype)
        g = through_backward(self, i, t)
        if g is None:
            continue
        total = g if total is None else total + g
    return total


def reduced(self, t, axes, keepdim):
    """A reduction of real ``x`` over ``axes`` (None: all) where each output element reads
    its own slice: the backward formula for a gradient of ones gives every row of the
    Jacobian at once, and the tangent is ``sum(rows * t)`` over the slices."""
    if t is None:
        return None
    if _complex(self):
        return _fallback(self, (t,) + (None,) * (len(self.fw_inputs) - 1))
    from ember import ones_like
    g = through_backward(self, 0, ones_like(self.fw_output).detach())
    if g is None:  # a backward giving no gradient (norm of order 0 counts): constant
        from ember import zeros_like
        return zeros_like(self.fw_output).detach()
    if axes is not None and len(axes) == 0:
        return g * t
    if axes is None:
        return (g * t).sum()
    return (g * t).sum(tuple(axes), keepdim=keepdim)


def picked(self, t, axis, idx, keepdim):
    """Value-selecting reductions along ``axis`` (max/min/median with indices, cummax):
    the tangent at the picked indices."""
    if t is None:
        return None
    if axis is None:
        return t
    if idx.dim() < t.dim():
        idx = idx.unsqueeze(axis)
    v = t.gather(axis, idx)
    return v if keepdim else v.squeeze(axis)
