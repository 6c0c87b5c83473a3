"""Hook handles shared by modules, optimizers and tensors (``torch.utils.hooks``)."""
import weakref
from collections import OrderedDict

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """A handle that removes a hook from its dict(s): ``handle.remove()``.

    Works as a context manager too: the hook is removed on exit.
    """

    next_id = 0
    # hooks removed so far (with ``next_id``, a count of every change to any hook dict
    # made through handles: ember.compile's fast path compares it, see ``_snapshot``)
    removed = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, dict):
            extra_dict = (extra_dict,)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self):
        """Remove the hook (a no-op if already removed)."""
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]
                RemovableHandle.removed += 1

    def __getstate__(self):
        return (self.hooks_dict_ref(), self.id,
                tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state):
        hooks, self.id, extras = state
        self.hooks_dict_ref = weakref.ref(hooks if hooks is not None else OrderedDict())
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras if d is not None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
