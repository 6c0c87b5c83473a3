"""Saved-tensor hooks: the stack of ``(pack_hook, unpack_hook)`` pairs that
``torch.autograd.graph.saved_tensors_hooks`` pushes, and how a node's saved entries are
packed when it is recorded and unpacked when backward reads ``saved_tensors``.

Nodes keep saved inputs as ``(tensor, version)`` and saved outputs as
``(array, counter, version, requires_grad, output_nr)`` (see ``node.py``). While a pair of
hooks is active, each entry that holds a tensor becomes a :class:`Packed`: the pack hook's
result and the unpack hook. As in PyTorch, a packed tensor is not checked for in-place
changes (the hooks own what they keep). Nothing is done (one list test per recorded node)
when no hook is active.
"""
from ember import _tensor

# the active (pack, unpack) pairs, innermost last; PyTorch uses the innermost only
stack = []
# the message of an active ``disable_saved_tensors_hooks``, or None
disabled = [None]


class Packed:
    """One saved tensor as its pack hook returned it, with what autograd needs to give
    the unpacked value the saved tensor's place in the graph."""

    __slots__ = ("packed", "unpack", "vc", "version", "output", "rg", "nr", "src")

    def __init__(self, packed, unpack, vc, version, output, rg, nr, src):
        self.packed, self.unpack, self.vc, self.version = packed, unpack, vc, version
        self.output, self.rg, self.nr, self.src = output, rg, nr, src

    def value(self):
        """What the unpack hook returns (checked to be a Tensor, as in PyTorch)."""
        t = self.unpack(self.packed)
        if not isinstance(t, _tensor.Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but "
                            f"got result of type {type(t).__name__}")
        return t

    def input(self):
        """A saved input: the unpacked values with the original tensor's ``grad_fn``
        (the original leaf itself when the hook gave it back)."""
        t = self.value()
        src = self.src
        if t is src:
            return t
        out = _tensor._make(t._data, False)
        out._vc = self.vc
        if type(src) is tuple:  # (grad_fn, output_nr) of a non-leaf
            out._requires_grad = True
            out.grad_fn, out._output_nr = src
        elif src is not None:
            # a leaf that requires grad, handed back as another Tensor: gradients taken
            # through it (a double backward) still reach the leaf
            out._requires_grad = True
            out.grad_fn = _leaf_alias(src)
        return out


_alias_class = []


def _leaf_alias(leaf):
    """A node passing its gradient on to ``leaf`` (PyTorch's unpacked leaf keeps the
    leaf's gradient accumulator; ember's edges name the leaf itself)."""
    if not _alias_class:
        from ember.autograd.node import Node

        class Alias(Node):
            _node_name = "AliasBackward0"

            def backward(self, g):
                return (g,)
        _alias_class.append(Alias)
    node = object.__new__(_alias_class[0])
    node._edges = (leaf,)
    return node


def _pack(t, vc, version, output=False, rg=False, nr=0, src=None):
    from ember.autograd.grad_mode import no_grad
    pack, unpack = stack[-1]
    with no_grad():  # as in PyTorch, pack hooks run without recording a graph
        packed = pack(t)
    return Packed(packed, unpack, vc, version, output, rg, nr, src)


def pack_entries(saved, make_output):
    """``saved`` (a node's list of entries) with each tensor packed by the innermost hook.
    ``make_output(entry)`` builds the Tensor a saved output entry stands for."""
    out = []
    for item in saved:
        if type(item) is Packed or type(item) is not tuple:
            out.append(item)
        elif len(item) == 5:
            arr, vc, version, rg, nr = item
            out.append(_pack(make_output(item), vc, version, True, rg, nr))
        else:
            t, version = item
            if isinstance(t, _tensor.Tensor):
                # a leaf that requires grad is kept (it lives on as a parameter anyway)
                # to be recognised when the hook hands it back
                src = (t.grad_fn, t._output_nr) if t.grad_fn is not None else \
                    (t if t._requires_grad else None)
                out.append(_pack(t, t._vc, version, src=src))
            else:
                out.append(item)
    return out
