"""PyTorch's backward node name, declared on the composite function that makes it.

ember builds some functions from primitives that PyTorch runs as one kernel with its own
node (``mse_loss`` is a subtraction, a square and a mean; PyTorch records one
``MseLossBackward0``). The function declares PyTorch's name where it is defined, the
role of the ``name:`` line of PyTorch's ``derivatives.yaml``::

    @node_name("MseLossBackward0")
    def mse_loss(input, target, ...):
        ...

and the node its call leaves on the output is of a class of that name (a subclass of
the class of ember's last primitive, made once per pair): ``print(loss.grad_fn)``,
``type(fn).__name__`` (what torchviz prints), ``make_dot`` and tutorials agree with
PyTorch. The node keeps ember's inputs and backward.

``name`` may be a function of the call's arguments returning the name, or None where
PyTorch itself runs a composite for that call (``smooth_l1_loss`` with ``beta=0`` is
``l1_loss``). Only a node the call made is named: none when the output is one of the
inputs (an in-place call), was passed as ``out=``, or shares an input's node.
"""
import functools

__all__ = ["node_name", "name_output"]

_NAMED = {}


def node_name(name):
    """Decorator declaring PyTorch's node name (a string, or ``f(*args, **kwargs)``
    giving the name or None) for the output of the decorated composite function."""
    def decorate(fn):
        @functools.wraps(fn)
        def named(*args, **kwargs):
            out = fn(*args, **kwargs)
            if kwargs.get("inplace") or kwargs.get("out") is not None:
                return out
            n = name(*args, **kwargs) if callable(name) else name
            if n is not None:
                name_output(out, n, args)
            return out
        named.torch_node_name = name
        return named
    return decorate


def name_output(out, name, inputs=()):
    """Make the node that produced ``out`` one of class ``name`` (see the module's
    docstring); returns ``out``."""
    fn = getattr(out, "grad_fn", None)
    if fn is None or type(fn)._node_name == name:
        return out
    for a in inputs:
        if a is out or getattr(a, "grad_fn", None) is fn:
            return out
    cls = type(fn)
    sub = _NAMED.get((cls, name))
    if sub is None:
        sub = _NAMED[(cls, name)] = type(cls)(cls._op_name, (cls,), {
            "_node_name": name, "_op_name": cls._op_name, "__module__": cls.__module__,
            "__qualname__": cls.__qualname__, "_renamed_from": cls})
    fn.__class__ = sub
    return out
