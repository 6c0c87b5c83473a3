"""The guards of ``ember.compile`` that read module trees and functions: the key's
hooks and free objects (:func:`_hook_key`, :func:`_free_objects`), and the fast path of
a call repeated with the same objects -- :func:`_snapshot` of the last call and
:func:`_same_as`, which compares the next call with it by identity."""
from itertools import chain as _chain
from operator import attrgetter
from operator import is_ as _is

from ember import _tensor
from ember.autograd.grad_mode import state as _grad_state
from ember.nn.modules import module as _module
from ember.nn.modules.module import Module
from ember.utils.hooks import RemovableHandle as _Handle

Tensor = _tensor.Tensor
_mode_active = _tensor._mode_active


def _global_hooks():
    """The dictionaries of the hooks registered for every module
    (``register_module_forward_hook``...)."""
    m = _module
    return (m._global_forward_pre_hooks, m._global_forward_hooks,
            m._global_forward_hooks_always_called, m._global_backward_pre_hooks,
            m._global_backward_hooks)


def _hook_key(dicts):
    """The hooks of ``dicts`` by handle and identity (the guard key's part)."""
    return tuple(tuple((k, id(v)) for k, v in h.items()) for h in dicts)


def _free_objects(fn):
    """The tensors and modules a function reads from its closure and globals (by
    name): the graph holds them, so their identity (and a module's ``training`` and
    parameters) is guarded. Objects reached only through other functions are not."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    found = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found.append((name, cell.cell_contents))
        except ValueError:  # an empty cell
            pass
    g = getattr(fn, "__globals__", {})
    found += [(n, g[n]) for n in code.co_names if n in g]
    return tuple((n, o) for n, o in found if isinstance(o, (Tensor, Module)))


def _tree(module, out, seen):
    """``module.modules()`` (pre-order, each module once) appended to ``out``, without
    the dotted names ``named_modules`` builds."""
    if id(module) in seen:
        return out
    seen.add(id(module))
    out.append(module)
    for child in module._modules.values():
        if child is not None:
            _tree(child, out, seen)
    return out


def _const_key(v):
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return (type(v).__name__, id(v))


def _same_as(last, args):
    """``last``'s entry when ``args`` and the module tree pass every guard as they did
    on the call :func:`_snapshot` recorded, else None."""
    entry, grad, specs, subs, free, hooks = last
    if _grad_state.grad_enabled != grad or len(args) != len(specs) or _mode_active[0]:
        return None
    if _Handle.next_id != hooks[0] or _Handle.removed != hooks[1]:
        return None  # a hook was registered or removed somewhere since (the key reads them)
    for t, (shape, dtype, rg, c) in zip(args, specs):
        if type(t) is not Tensor:
            return None
        d = t._data
        if d.shape != shape or t._requires_grad != rg or d.flags.c_contiguous != c:
            return None
        dt = d.dtype
        if dt is not dtype and dt != dtype:  # (NumPy hands out one object per dtype)
            return None
    if free is not None and not _same_free(free):
        return None
    # every module's ``__dict__`` and its parameter, buffer and child dicts at once
    # (see ``_snapshot``): the same dict objects, lengths, names and values by identity
    mods, mdicts, dicts, lens, keys, vals, held, rgs = subs
    if not all(map(_is, map(_dict_of, mods), mdicts)):
        return None
    if tuple(map(len, dicts)) != lens or tuple(_chain(*dicts)) != keys or \
            not all(map(_is, _chain(*map(dict.values, dicts)), vals)):
        return None
    if list(map(_rg_of, held)) != rgs:
        return None
    return entry


_rg_of = attrgetter("_requires_grad")
_dict_of = attrgetter("__dict__")
_mode_active = _tensor._mode_active


_MISSING = object()  # a global name not (or no longer) defined; an empty cell


def _free_state(fn):
    """(function, its closure cells' contents, the values of the global names its code
    reads): everything :func:`_free_objects` looks at, held so that identity is a sound
    test of "the same objects"."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # an empty cell
            cells.append(_MISSING)
    g = getattr(fn, "__globals__", {})
    return fn, code, tuple(cells), code.co_names, g, tuple([g.get(n, _MISSING)
                                                            for n in code.co_names])


def _same_free(free):
    """Whether the function's code, closure and globals hold the objects they held
    when ``free`` (:func:`_free_state`) was taken."""
    fn, code, cells, names, g, values = free
    if fn.__code__ is not code:
        return False
    closure = fn.__closure__ or ()
    if len(closure) != len(cells):
        return False
    for cell, v in zip(closure, cells):
        try:
            if cell.cell_contents is not v:
                return False
        except ValueError:
            if v is not _MISSING:
                return False
    get = g.get
    for n, v in zip(names, values):
        if get(n, _MISSING) is not v:
            return False
    return True


def _snapshot(module, entry, grad, args, fn=None):
    """What :meth:`CompiledFunction._same_as_last` compares the next call with: the
    entry, the grad mode, each tensor argument's (shape, NumPy dtype, requires_grad),
    and per module of the tree its ``__dict__``'s names and values (held, so identity
    is a sound test), its parameters with their requires_grad, its buffers and its
    children. For a function (``module`` None), its closure's and globals' objects
    (:func:`_free_state`) and the trees of the modules among them. And the count of
    hooks registered and removed through handles anywhere: the guard key reads each
    module's hooks, which a registration changes in a dict the identities above miss.
    The guard key reads nothing else of the module trees."""
    specs = tuple((t._data.shape, t._data.dtype, t._requires_grad, t._data.flags.c_contiguous)
                  for t in args)
    free = None
    if module is not None:
        mods = _tree(module, [], set()) if module._modules else [module]
    else:
        free = _free_state(fn)
        mods, seen = [], set()
        for _, o in _free_objects(fn):
            if isinstance(o, Module):
                _tree(o, mods, seen)
    mdicts, dicts, held = [], [], []
    for s in mods:
        d = s.__dict__
        mdicts.append(d)
        dicts += [d, d["_parameters"], d["_buffers"], d["_modules"]]
        held += [t for t in d["_parameters"].values() if t is not None]
    subs = (tuple(mods), tuple(mdicts), tuple(dicts), tuple(map(len, dicts)),
            tuple(_chain(*dicts)), tuple(_chain(*map(dict.values, dicts))), tuple(held),
            [t._requires_grad for t in held])
    return entry, grad, specs, subs, free, (_Handle.next_id, _Handle.removed)
