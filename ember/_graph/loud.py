"""Loud tracing: the :class:`TracerWarning` a capture emits at the user's line when a
traced tensor leaves the recorded ops (``bool``/``int``/``item``/``len``/iteration...,
a backward pass recorded with its saved sizes), and the words it says (see
:mod:`ember._graph.capture`)."""
import warnings

__all__ = ["TracerWarning"]


class TracerWarning(Warning):
    """A trace may not generalize to other inputs (PyTorch's ``torch.jit.TracerWarning``)."""

    @staticmethod
    def ignore_lib_warnings():
        warnings.filterwarnings("ignore", category=TracerWarning, module="ember.(?!jit)")


_LOUD = {
    "__bool__": "a Python boolean", "__int__": "a Python integer",
    "__float__": "a Python float", "__index__": "a Python index", "item": "a Python number",
    "tolist": "a Python list", "numpy": "a NumPy array", "__array__": "a NumPy array",
}
_TAIL = (" might cause the trace to be incorrect. We can't record the data flow of Python "
         "values, so this value will be treated as a constant in the future. This means that "
         "the trace might not generalize to other inputs!")
_LEN_MSG = ("Using len to get tensor shape might cause the trace to be incorrect. Recommended "
            "usage would be tensor.shape[0]. Passing a tensor of different shape might lead to "
            "errors or silently give incorrect results.")
_ITER_MSG = ("Iterating over a tensor might cause the trace to be incorrect. Passing a tensor "
             "of different shape won't change the number of iterations executed (and might "
             "lead to errors or silently give incorrect results).")


_BACKWARD_MSG = ("Recording a backward pass: the sizes its formulas saved in the forward "
                 "are recorded as constants, so the trace might not generalize to inputs "
                 "of other sizes!")


def _warn(msg, frame):
    if frame is None:
        warnings.warn(msg, TracerWarning, stacklevel=3)
        return
    _warn_at(msg, frame.f_globals, frame.f_code.co_filename, frame.f_lineno)


def _warn_at(msg, g, filename, lineno):
    """``msg`` as a TracerWarning at ``filename:lineno`` of the module with globals ``g``
    (a line kept from earlier in the trace)."""
    where = (msg, TracerWarning, filename, lineno)
    registry = g.setdefault("__warningregistry__", {})
    try:
        warnings.warn_explicit(*where, module=g.get("__name__"), registry=registry,
                               module_globals=g)
    except ImportError:
        # code run by ``python -c`` (or a REPL): ``__main__``'s loader is the builtin
        # importer, which refuses to look for its source; warn without the source line
        warnings.warn_explicit(*where, module=g.get("__name__"), registry=registry)


_LOUD_MSGS = {name: f"Converting a tensor to {what}" + _TAIL for name, what in _LOUD.items()}
_LOUD_MSGS["__len__"] = _LEN_MSG
_LOUD_MSGS["__iter__"] = _ITER_MSG
