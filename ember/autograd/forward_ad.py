"""torch.autograd.forward_ad on ember: dual tensors whose tangents come from reverse mode.

ember has no forward-mode engine yet. ``make_dual(x, t)`` returns a tensor that records an
autograd graph (a fresh leaf, or a view of ``x`` when ``x`` already requires grad) and
remembers ``t``; ops then run as usual. ``unpack_dual(y)`` computes ``y``'s tangent
``sum_i J_i t_i`` over the level's dual inputs by the double-vjp trick: with ``u`` a
zero cotangent that requires grad, ``g_i = J_iᵀ u`` is linear in ``u``, and differentiating
``g_i`` w.r.t. ``u`` against ``t_i`` gives ``J_i t_i``. Cost per ``unpack_dual``: two
backward passes (the second through the first's graph), instead of forward mode's
tangent arithmetic riding along the forward pass.

Differences from PyTorch: tangents need grad mode on while the ops run (under
``no_grad`` no graph is recorded: ``unpack_dual`` called under ``no_grad`` raises, but a
result computed under ``no_grad`` and unpacked after it gets tangent ``None``, where
PyTorch would give one); dual tensors report ``requires_grad=True``; one level at a time
(nested levels raise, as torch's do).
"""
from collections import namedtuple

from ember.autograd.grad_mode import enable_grad, is_grad_enabled

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

_levels = []  # one dict per open level: id(dual) -> (dual, tangent)

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


def enter_dual_level():
    """Open a new forward-AD level and return its index."""
    if _levels:
        raise RuntimeError("Entering a new forward AD level but the current level is not "
                           "valid. Make sure you did not modified it directly. (ember, like "
                           "PyTorch, does not support nested forward AD levels)")
    _levels.append({})
    return len(_levels) - 1


def exit_dual_level(*, level=None):
    """Close the current forward-AD level; its dual tensors lose their tangents."""
    if not _levels or (level is not None and level != len(_levels) - 1):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    _levels.pop()


class dual_level:
    """Context manager for a forward-AD level (``with fwAD.dual_level(): ...``)."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


def _level(level):
    if not _levels:
        return None
    if level is not None and level != len(_levels) - 1:
        raise RuntimeError(f"forward_ad: level {level} is not the current level")
    return _levels[-1]


def make_dual(tensor, tangent, *, level=None):
    """A tensor whose value is ``tensor`` and whose forward gradient is ``tangent``."""
    duals = _level(level)
    if duals is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level "
                           "exists, make sure to enter_dual_level() first.")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           f"that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    with enable_grad():
        dual = (tensor.view_as(tensor) if tensor.requires_grad
                else tensor.detach().requires_grad_(True))
    duals[id(dual)] = (dual, tangent.detach().to(tensor.dtype))
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor``; ``tangent`` is None when ``tensor`` does not
    depend on a dual tensor of the level (see the module docstring for the cost)."""
    from ember import zeros_like
    from ember.autograd import grad

    duals = _level(level)
    if duals is None or not hasattr(tensor, "requires_grad"):
        return UnpackedDualTensor(tensor, None)
    if id(tensor) in duals and duals[id(tensor)][0] is tensor:
        return UnpackedDualTensor(tensor, duals[id(tensor)][1])
    if not tensor.requires_grad:
        if duals and not is_grad_enabled():
            raise NotImplementedError("forward_ad.unpack_dual: ember computes tangents from "
                                      "the autograd graph, which is not recorded under "
                                      "no_grad; run the forward-AD ops with grad mode on")
        return UnpackedDualTensor(tensor, None)
    inputs = [d for d, _ in duals.values()]
    tangents = [t for _, t in duals.values()]
    with enable_grad():
        u = zeros_like(tensor).requires_grad_(True)
        gs = grad(tensor, inputs, u, retain_graph=True, create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, t in zip(gs, tangents) if g is not None and g.requires_grad]
        if not pairs:
            return UnpackedDualTensor(tensor, None)
        jv, = grad([g for g, _ in pairs], [u], [t for _, t in pairs], retain_graph=True,
                   allow_unused=True)
    return UnpackedDualTensor(tensor, zeros_like(tensor) if jv is None else jv.detach())
