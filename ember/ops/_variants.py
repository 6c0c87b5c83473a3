"""Which variants of a public op exist, declared once per op.

PyTorch's ``native_functions.yaml`` gives each op one entry whose ``variants: function,
method`` line makes ``torch.op`` and ``Tensor.op``, and whose in-place form ``op_`` sits
beside it.  ember's family files do the same with one table of :class:`Variants` rows:
:func:`bind` makes the module's ``__all__`` (the functions ``ember`` exports), the
``Tensor`` methods and the in-place methods from it, so a public name is written once.

The methods are the very function objects of the module (the fast closures of
``Primitive.unary_function``/``binary_function`` stay one call away from the op).
"""
from ember._tensor import Tensor
from ember.ops._inplace import inplace_method


class Variants:
    """One row: public ``names`` (one string, separated by spaces; aliases of one op and
    ops with the same variants share a row) and the variants they have.

    - ``method``: ``Tensor.name`` is the function itself.
    - ``inplace``: ``Tensor.name_`` computes out of place and writes into ``self``.
    - ``copies``: the in-place form keeps a copy of the old values when a graph is
      recorded (backward reads them); None: when the op's primitive saves its inputs.
    - ``promotes``: the result dtype is the promotion of the operands, checked against
      ``self`` before anything is computed (PyTorch's in-place check).
    """

    __slots__ = ("names", "method", "inplace", "copies", "promotes")

    def __init__(self, names, *, method=True, inplace=False, copies=None, promotes=False):
        self.names = names.split()
        self.method, self.inplace = method, inplace
        self.copies, self.promotes = copies, promotes


def _copies(fn, copies):
    if copies is not None:
        return copies
    prim = getattr(fn, "primitive", None)
    return prim is not None and prim.save_inputs != ()


def bind(namespace, rows, cls=Tensor):
    """Bind the methods ``rows`` declare for the functions in ``namespace`` (a module's
    globals) and return every public name, for the module's ``__all__``."""
    names, made = [], {}
    for row in rows:
        for name in row.names:
            fn = namespace[name]  # a KeyError names a row with no function behind it
            names.append(name)
            if row.method:
                setattr(cls, name, fn)
            if row.inplace:
                copies = _copies(fn, row.copies)
                key = (fn, copies, row.promotes)
                if key not in made:  # aliases share one in-place method
                    made[key] = inplace_method(fn, copies, row.promotes)
                setattr(cls, name + "_", made[key])
    return names
