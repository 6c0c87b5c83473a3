"""One ordered stack of modes: how transforms and tools meet every op call.

Every tensor op reaches NumPy through ``Primitive.apply`` or one of the fast closures
that ``Primitive.unary_function`` / ``binary_function`` build. Each of them asks one
question before its plain path: is any mode visible (``active[0]``)? If not, the op runs
as it always did. If so, the call goes to :func:`dispatch`, which hands it to the
innermost visible mode's :meth:`Mode.op`.

A mode handles the call with the op's own rules (vmap runs ``cls.batch``, forward AD runs
``cls.jvp``, capture records a node, the profiler times it) and, to run the op below
itself, simply calls ``cls.apply(...)`` again: while a mode's ``op`` runs, that mode and
every mode pushed after it are hidden, so the call re-dispatches to the next mode down
and finally to the plain path. This is PyTorch's dispatch-mode stack and functorch's
layers, and JAX's trace stack: transforms compose by nesting, in the order the user
entered them (``trace(vmap(f))`` pushes capture, then a vmap level; the vmap level turns
a batched call into calls on whole batches, and capture records those).

Backward steps run by the engine go through :func:`run_node` the same way, except that
the backward formula itself runs with every mode visible (a profiler records the ops a
backward step runs, as children of that step). Custom ``autograd.Function`` calls go
through :func:`run_function` (:meth:`Mode.function`: forward AD runs the Function's
``jvp``, a vmap level refuses a batched argument), and the few Python composites that
read values on the way (index parsing, random factories, host checks) are marked
:func:`routed`: a mode may take such a call whole (:meth:`Mode.routed_call`, vmap's
function-level rules) with every mode still visible.

A mode may also run a call *beneath* other modes (:class:`beneath`): forward AD over a
vmap level computes a batched op's tangents on the whole batch, under the level.

Composite functions -- the few calls a graph capture records one level above the
primitives, such as ``view``, ``reshape``, ``x[key]`` and the factories -- ask the stack
themselves, with the same one check on their plain path: ``if active[0]`` and the
innermost visible mode records composites (:func:`recorder`), the function hands itself
to that mode's ``composite`` method, which records it as one node and runs it with the
mode hidden (so the primitives inside are not recorded again). ``Tensor.size``/``shape``
and the conversions of a tensor to a Python value likewise ask for the innermost visible
mode with a ``sym_size`` / ``python_value`` method (``ember._tensor._mode_with``).

The stack is process-wide, as ember's earlier hook slots were: a mode that must ignore
other threads checks the thread itself.
"""
from ember import _tensor

__all__ = ["Mode", "stack", "active", "push", "pop", "dispatch", "run_node", "find",
           "hidden", "recorder", "visible_with", "run_function", "routed", "run_routed",
           "beneath", "visible"]

# the modes, outermost (pushed first) first, and how many of them, from the bottom of the
# stack, the current call can see; both objects live in ember._tensor, whose own methods
# consult them
stack = _tensor._mode_stack
active = _tensor._mode_active
visible_with = _tensor._mode_with
# the innermost visible mode if it records composite functions (a graph capture), else
# None. A composite function asks this after ``if active[0]``; the mode's
# ``composite(op, fn, args, kwargs)`` records ``fn(*args, **kwargs)`` as one node and runs
# it with the mode hidden, so the nested call of ``fn`` takes its plain path.
recorder = _tensor._mode_recorder


class Mode:
    """Base of every mode. Subclasses override :meth:`op` (and :meth:`node` to see
    backward steps); both defaults pass the call down unchanged. A mode that records
    composite functions sets ``composites = True`` and defines ``composite(op, fn, args,
    kwargs)`` (see :func:`recorder`)."""

    composites = False

    def transparent(self, values):
        """Whether a composite function called with the argument ``values`` may be
        recorded by a capturing mode below this one, hiding this mode while it runs
        (this mode would pass on every op it makes). Default: no."""
        return False

    def op(self, cls, args, params):
        """Handle a call of the primitive ``cls``; ``cls.apply(*args, **params)`` runs it
        below this mode."""
        return cls.apply(*args, **params)

    def node(self, node, grads, below):
        """Handle the backward step of ``node``; ``below()`` runs it under the modes
        beneath this one and returns its input gradients."""
        return below()

    def function(self, cls, args, kwargs, below):
        """Handle a call of the custom ``autograd.Function`` ``cls`` (this mode and those
        above it hidden); ``below()`` runs it under the modes beneath and returns
        ``(result, ctx)``, which this method returns too."""
        return below()

    def routed_call(self, fn, args, kwargs):
        """Take a call of the :func:`routed` function ``fn`` whole (every mode stays
        visible), or return ``NotImplemented`` to leave it to the modes below."""
        return NotImplemented

    def __enter__(self):
        push(self)
        return self

    def __exit__(self, *exc):
        pop(self)
        return False


def push(mode):
    """Enter ``mode`` above every mode the current call can see (inside a mode's handler
    that is below the hidden ones, which come back when the handler returns)."""
    stack.insert(active[0], mode)
    active[0] += 1


def pop(mode):
    """Leave ``mode`` (raises ValueError if it is not on the stack)."""
    for i, m in enumerate(stack):
        if m is mode:
            del stack[i]
            if i < active[0]:
                active[0] -= 1
            return
    raise ValueError(f"{type(mode).__name__} is not on the mode stack")


def dispatch(cls, args, params):
    """Hand a call of ``cls`` to the innermost visible mode (``active[0]`` must be > 0)."""
    n = active[0]
    mode = stack[n - 1]
    active[0] = n - 1
    try:
        return mode.op(cls, args, params)
    finally:
        active[0] = n


def run_node(node, grads, n=None):
    """Run one backward step of ``node`` through the visible modes' :meth:`Mode.node`."""
    n = active[0] if n is None else n
    while n > 0:
        mode = stack[n - 1]
        if type(mode).node is not Mode.node:
            return mode.node(node, grads, lambda m=n - 1: run_node(node, grads, m))
        n -= 1
    return node.backward(*grads)


def run_function(cls, args, kwargs, plain, n=None):
    """Run the custom Function ``cls`` through the visible modes' :meth:`Mode.function`;
    ``plain(args, kwargs)`` runs it and returns ``(result, ctx)``."""
    n = active[0] if n is None else n
    while n > 0:
        mode = stack[n - 1]
        if type(mode).function is not Mode.function:
            saved = active[0]
            active[0] = n - 1
            try:
                return mode.function(cls, args, kwargs,
                                     lambda m=n - 1: run_function(cls, args, kwargs, plain, m))
            finally:
                active[0] = saved
        n -= 1
    return plain(args, kwargs)


def routed(fn):
    """Mark ``fn`` (a Python composite that reads values on the way) as one the visible
    modes may take whole through :meth:`Mode.routed_call`; with no mode visible it is
    ``fn``'s cost plus one check."""
    def wrapper(*args, **kwargs):
        if active[0]:
            return run_routed(wrapper, fn, args, kwargs)
        return fn(*args, **kwargs)
    wrapper.__wrapped__ = fn
    # the rule tables key on this wrapper; later wrappers (``with_out``) copy the attribute
    wrapper.routed = wrapper
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, attr, getattr(fn, attr))
    return wrapper


def run_routed(key, fn, args, kwargs):
    """Offer a call of the routed function ``key`` to the visible modes, innermost first;
    the first that does not return ``NotImplemented`` answers it, else ``fn`` runs."""
    for mode in reversed(stack[:active[0]]):
        if type(mode).routed_call is not Mode.routed_call:
            out = mode.routed_call(key, args, kwargs)
            if out is not NotImplemented:
                return out
    return fn(*args, **kwargs)


def visible():
    """The modes the current call can see, outermost first."""
    return stack[:active[0]]


def find(kind):
    """The innermost mode on the stack that is an instance of ``kind``, or None."""
    for mode in reversed(stack):
        if isinstance(mode, kind):
            return mode
    return None


class hidden:
    """``with hidden(mode):`` runs its block as the handler of ``mode`` would: ``mode``
    and every mode above it are not visible (for code a mode runs outside ``op``)."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.saved = active[0]
        for i, m in enumerate(stack):
            if m is self.mode:
                active[0] = min(active[0], i)
                break
        return self

    def __exit__(self, *exc):
        active[0] = self.saved
        return False



class beneath:
    """``with beneath(mode, under):`` inside ``mode``'s handler, runs its block with
    ``mode`` moved to just beneath ``under`` (a mode lower on the stack) and the modes
    from ``under`` up to ``mode``'s own place visible: a call made in the block reaches
    ``under`` and the modes above it first, and ``mode`` only after them. ``mode`` may be
    a list of modes (the handler's own last): they move together, in their order. The
    order is restored on exit."""

    def __init__(self, mode, under):
        self.modes = list(mode) if isinstance(mode, (list, tuple)) else [mode]
        self.under = under

    def __enter__(self):
        self.saved = (list(stack), active[0])
        i = max(stack.index(m) for m in self.modes)
        for m in self.modes:
            stack.remove(m)
        at = stack.index(self.under)
        stack[at:at] = self.modes
        active[0] = i + 1
        return self

    def __exit__(self, *exc):
        stack[:], active[0] = self.saved
        return False
