"""torch.func.functional_call and stack_module_state: a module run with other tensors in
place of its parameters and buffers."""
import contextlib

from ember import _core as ember


def _owner(module, name):
    *path, last = name.split(".")
    for p in path:
        module = getattr(module, p)
    return module, last


@contextlib.contextmanager
def _swapped(module, tensors, tie_weights, strict):
    params = dict(module.named_parameters(remove_duplicate=False))
    buffers = dict(module.named_buffers(remove_duplicate=False))
    known = {**params, **buffers}
    if strict:
        missing = sorted(set(known) - set(tensors))
        unexpected = sorted(set(tensors) - set(known))
        if missing or unexpected:
            msg = []
            if unexpected:
                msg.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
            if missing:
                msg.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
            raise RuntimeError("Error(s) in reparametrizing for " f"{type(module).__name__}:\n\t"
                               + "\n\t".join(msg))
    tensors = dict(tensors)
    if tie_weights:
        # names sharing one tensor in the module share the replacement given for any of them
        by_id = {}
        for n, t in known.items():
            by_id.setdefault(id(t), []).append(n)
        for names in by_id.values():
            given = [n for n in names if n in tensors]
            if given:
                first = tensors[given[0]]
                for n in given[1:]:
                    if tensors[n] is not first:
                        raise ValueError(f"functional_call got multiple values for keys "
                                         f"{given}, which are tied. Consider using "
                                         "tie_weights=False")
                for n in names:
                    tensors.setdefault(n, first)
    saved = []
    try:
        for name, value in tensors.items():
            owner, last = _owner(module, name)
            if last in owner._parameters:
                table = owner._parameters
            elif last in owner._buffers:
                table = owner._buffers
            else:
                # an attribute the module does not have (strict=False): set it like torch
                saved.append((owner, last, None, getattr(owner, last, _MISSING)))
                object.__setattr__(owner, last, value)
                continue
            saved.append((owner, last, table, table[last]))
            table[last] = value
        yield
    finally:
        for owner, last, table, old in reversed(saved):
            if table is not None:
                table[last] = old
            elif old is _MISSING:
                object.__delattr__(owner, last)
            else:
                object.__setattr__(owner, last, old)


_MISSING = object()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """torch.func.functional_call: call ``module`` with the given tensors standing in for
    its parameters and buffers (by qualified name), restoring the originals afterwards.

    ``parameter_and_buffer_dicts`` is a dict or a tuple of dicts (keys must not repeat).
    ``tie_weights``: names tied in the module (one tensor under two names) follow the value
    given for either.  ``strict``: every parameter and buffer must be given, and nothing
    else."""
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (tuple, list)):
        tensors = {}
        for d in parameter_and_buffer_dicts:
            for k, v in d.items():
                if k in tensors:
                    raise ValueError(f"{k} appeared in multiple dictionaries; behavior of "
                                     "functional call is ambiguous")
                tensors[k] = v
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(parameter_and_buffer_dicts)}")
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, tensors, tie_weights, strict):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """torch.func.stack_module_state: ``(params, buffers)`` dicts whose tensors stack the
    same-named tensors of ``models`` along a new leading dim (for ``vmap`` ensembling).
    Stacked parameters are new leaves that require grad when the originals do."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/"
                           "eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stack(named):
        out = {}
        for name, t in named(models[0]):
            s = ember.stack([dict(named(m))[name].detach() for m in models])
            out[name] = s.requires_grad_(t.requires_grad) if t.is_floating_point() else s
        return out

    params = stack(lambda m: m.named_parameters())
    buffers = stack(lambda m: m.named_buffers())
    return params, buffers
