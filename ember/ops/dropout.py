"""``native_dropout``'s node: PyTorch's one ``NativeDropoutBackward0`` over the input,
in training and in eval alike. The keep-mask is drawn before the call and is a plain
argument, as in PyTorch; the composite multiplies by it and by ``1 / (1 - p)``.

``torch.native_dropout`` itself (argument checks, the mask) is
:func:`ember.nn._aten_ops.native_dropout`; the other dropouts are composites of
:mod:`ember.nn.functional` with no node of their own.
"""
from ember.ops.composite_node import CompositeNode

__all__ = []


def _native_dropout(input, keep, scale):
    return input.clone() if keep is None else input * keep * scale


class NativeDropout(CompositeNode):
    """``native_dropout``: PyTorch's one node over the input (the mask is drawn before,
    a plain argument as in PyTorch)."""
    save_inputs = (0, 1)
    n_inputs = 1
    composite = staticmethod(_native_dropout)
