"""How a recorded composite call is spelled: its arguments as programs usually write
them (:func:`call_args`), what a capture hands its recorder (see
:mod:`ember._graph.capture`)."""

__all__ = ["call_args"]


def call_args(fn, given):
    """``(args, kwargs)`` of a call of ``fn`` whose parameters hold the values in
    ``given`` (the function's ``locals()`` on entry), spelled as programs usually spell
    it: the positional parameters up to the last one not at its default, then ``*args``;
    options (``dtype``, ``device``...), keyword-only parameters and ``**kwargs`` by
    keyword when not at their defaults. What a composite function hands its recorder."""
    while hasattr(fn, "__wrapped__"):  # through its decorators (@node_name, @routed...)
        fn = fn.__wrapped__
    co = fn.__code__
    n, nk = co.co_argcount, co.co_kwonlyargcount
    names = co.co_varnames
    defaults = fn.__defaults__ or ()
    first = n - len(defaults)
    dflt = dict(zip(names[first:n], defaults))
    dflt.update(fn.__kwdefaults__ or {})
    npos = n
    for i in range(first, n):
        if names[i] in _OPTIONS:
            npos = i
            break
    args = [given[p] for p in names[:npos]]
    i = n + nk
    var = ()
    if co.co_flags & 4:  # *args
        var = tuple(given[names[i]])
        i += 1
    if not var:
        while len(args) > first and _is_default(args[-1], dflt[names[len(args) - 1]]):
            args.pop()
    kwargs = {k: given[k] for k in names[npos:n] + names[n:n + nk]
              if not (k in dflt and _is_default(given[k], dflt[k]))}
    if co.co_flags & 8:  # **kwargs
        kwargs.update(given[names[i]])
    return tuple(args) + var, kwargs


_OPTIONS = frozenset(("dtype", "device", "requires_grad", "out", "layout", "pin_memory",
                      "memory_format", "generator"))


def _is_default(v, d):
    return v is d or (type(v) is type(d) and type(v) in (int, float, bool, str) and v == d)
