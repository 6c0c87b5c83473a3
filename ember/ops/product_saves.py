"""What the matrix-product nodes keep for backward: of two multiplied operands, each
only where the other needs a gradient, as PyTorch keeps them (``mm``, ``addmm``,
``matmul``'s nodes, ``linear``'s ``AddmmBackward0``; see docs/autograd.md, "What a
product keeps for backward"). A node class takes ``record_crossed`` as its ``_record``
and ``pack_crossed`` as its ``_pack_saved``, and names in ``_crossed`` the edge that
reads each of its two saved operands."""
import numpy as np

from ember.autograd.node import Primitive

__all__ = ["NOT_SAVED", "drop_unneeded", "record_crossed", "pack_crossed", "factor_shapes"]


def drop_unneeded(self):
    """Leave out of what the node keeps each multiplied operand whose partner needs no
    gradient: a product's gradient for one operand reads only the other, so PyTorch saves
    ``mat1`` only where ``mat2`` requires grad and ``mat2`` only where ``mat1`` does (the
    operand left out may then change in place before backward without an error, as in
    PyTorch). ``_crossed`` gives, for the two saved operands in order, the edge of the
    input whose gradient reads each one."""
    saved = self._saved
    if type(saved) is list and len(saved) == 2:
        edges = self._edges
        i, j = self._crossed
        if edges[i] is None and type(saved[0]) is tuple:
            saved[0] = NOT_SAVED
        if edges[j] is None and type(saved[1]) is tuple:
            saved[1] = NOT_SAVED


NOT_SAVED = (None, None)  # a saved slot left empty (``saved_tensors`` gives None there)


def record_crossed(self, args, out):
    """``Primitive._record``, then the operands no gradient reads left out (before any
    saved-tensor hook packs them: ``pack_crossed``)."""
    t = Primitive._record(self, args, out)
    drop_unneeded(self)
    return t


def pack_crossed(self):
    """``Node._pack_saved`` on what the node keeps (the hooks see no operand that no
    gradient reads, as PyTorch's pack hooks see none)."""
    drop_unneeded(self)
    Primitive._pack_saved(self)


def factor_shapes(g, xa, wa):
    """``(m, k, n)`` of the product ``x @ wt`` whose output gradient is the matrix ``g``,
    from whichever of the NumPy matrices ``xa`` (m, k) and ``wa`` (k, n) was saved (None
    where it was not); None where they disagree with ``g`` or are not such matrices."""
    if g.ndim != 2:
        return None
    m, n = g.shape
    k = None
    if xa is not None:
        if type(xa) is not np.ndarray or xa.ndim != 2 or xa.shape[0] != m:
            return None
        k = xa.shape[1]
    if wa is not None:
        if type(wa) is not np.ndarray or wa.ndim != 2 or wa.shape[1] != n or \
                k is not None and wa.shape[0] != k:
            return None
        k = wa.shape[0]
    return None if k is None else (m, k, n)
