"""What a node keeps for its backward and how it reads it back: saved inputs and
outputs, each checked against in-place modification (``saved_tensors``), the fast reads
of the common cases, and what saved-tensor hooks are given. Shared by the graph's nodes
(:mod:`ember.autograd.node`), custom Functions and the compiled plan."""
from ember import _tensor
from ember.autograd import _saved_hooks

Tensor = _tensor.Tensor
_make = _tensor._make
_ndarray = _tensor._ndarray
_new = object.__new__
_Packed = _saved_hooks.Packed

_FREED = "freed"
_FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


def hook_saves_of(*positions, if_grad=()):
    """A ``Primitive._hook_saves`` that gives saved-tensor hooks the arguments at
    ``positions`` (an index or mask PyTorch's node saves, which ember's forward keeps as
    an array of its own): a Tensor argument as it is, an array as a new Tensor. Those
    also in ``if_grad`` only when they are Tensors that require grad (a source PyTorch
    saves for its shape where it has a gradient to shape)."""
    def saves(self, args, out):
        out = []
        for i in positions:
            a = args[i] if i < len(args) else None
            if i in if_grad and not (isinstance(a, Tensor) and a._requires_grad):
                continue
            if isinstance(a, Tensor):
                out.append((a, a._vc[0]))
            elif a is not None:
                if not isinstance(a, _ndarray):
                    import numpy as np
                    a = np.asarray(a)
                out.append((_make(a, False), None))
        return out
    return saves


def _SavedOutput(arr, vc, rg, nr=0):
    """How a node keeps one of its own outputs for backward (see ``saved_tensors``)."""
    return (arr, vc, vc[0], rg, nr)


def _read_saved(self):
    """``saved_tensors``: saved inputs, then saved outputs, each checked against in-place
    modification."""
    saved = self._saved
    if saved is _FREED:
        raise RuntimeError(_FREED_MSG)
    if saved is None:
        return ()
    n = len(saved)
    if n == 1:
        # the common cases first: one or two saved inputs, or the saved output, unchanged
        # since they were saved
        item = saved[0]
        if type(item) is tuple:
            if len(item) == 2:
                t, version = item
                if version is None or t._vc[0] == version:
                    return (t,)
            elif item[1][0] == item[2] and "_fw_out" not in self.__dict__:
                # the output, rebuilt as the loop below does (``_make``, inlined)
                arr, vc, version, rg, nr = item
                t = _new(Tensor)
                t._data = arr
                t._grad = t._base = t._extra = None
                t._vc = vc
                t._requires_grad = rg
                t.grad_fn = self if rg else None
                t._output_nr = nr if rg else 0
                return (t,)
    elif n == 2:
        i0, i1 = saved
        if type(i0) is tuple and type(i1) is tuple and len(i0) == 2 and len(i1) == 2:
            t0, v0 = i0
            t1, v1 = i1
            if (v0 is None or t0._vc[0] == v0) and (v1 is None or t1._vc[0] == v1):
                return (t0, t1)
    out = []
    for i, item in enumerate(saved):
        if type(item) is _Packed:
            # as in PyTorch, what the hooks keep is not checked for in-place changes
            out.append(item.input() if not item.output else
                       self._rebuild(item.value(), item))
        elif len(item) == 5:
            # a saved output: rebuilt here so that the graph holds no cycle
            arr, vc, version, rg, nr = item
            t = _make(arr, rg)
            t._vc = vc
            if rg:
                t.grad_fn = self
                t._output_nr = nr
            if vc[0] != version:
                self._raise_stale(t, i, vc[0], version, output=True)
            fw = self.__dict__.get("_fw_out")
            if fw is not None:  # the output's tangent (forward-over-reverse)
                fw(t, nr)
            out.append(t)
        else:
            t, version = item
            if version is not None and t._vc[0] != version:
                self._raise_stale(t, i, t._vc[0], version)
            out.append(t)
    return tuple(out)


def _saved_inputs(self):
    """The one or two saved inputs as ``_read_saved`` gives them, when that is all it
    would do (each unchanged since saved, none packed by saved-tensor hooks); None in
    every other case, where ``_read_saved`` gives them or the error."""
    saved = self._saved
    if type(saved) is list:
        n = len(saved)
        if n == 2:
            i0, i1 = saved
            if type(i0) is tuple and type(i1) is tuple and len(i0) == 2 and len(i1) == 2:
                t0, v0 = i0
                t1, v1 = i1
                if (v0 is None or t0._vc[0] == v0) and (v1 is None or t1._vc[0] == v1):
                    return t0, t1
        elif n == 1:
            item = saved[0]
            if type(item) is tuple and len(item) == 2:
                t, version = item
                if version is None or t._vc[0] == version:
                    return (t,)
    return None


def _saved_output_array(self):
    """The array of the one output the node saved, when it is unchanged since (what
    ``_read_saved`` would rebuild a Tensor around, for a formula computed on arrays);
    None in every other case (hooks' packs, freed, changed in place, a forward-mode
    tangent to attach), where ``_read_saved`` gives the Tensor or the error."""
    saved = self._saved
    if type(saved) is list and len(saved) == 1:
        item = saved[0]
        if type(item) is tuple and len(item) == 5 and item[1][0] == item[2] and \
                "_fw_out" not in self.__dict__:
            return item[0]
    return None
