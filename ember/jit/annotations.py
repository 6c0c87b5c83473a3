"""``torch.jit.annotations``: the typing names TorchScript code imports
(``BroadcastingList2``, ``Optional``, ``Tuple``...) and the predicates on
annotations; ember's script compiler reads annotations itself."""
import inspect
import typing
from typing import Any, Dict, List, Optional, Tuple, Union  # noqa: F401, UP035

__all__ = ["Any", "List", "BroadcastingList1", "BroadcastingList2", "BroadcastingList3",
           "Tuple", "Dict", "Optional", "Union", "is_tuple", "is_list", "is_dict",
           "is_optional", "is_union", "try_real_annotations", "get_param_names"]


class BroadcastingListCls:
    """``BroadcastingList2[int]``: an int or a list of ints (subscripting gives None,
    as in torch; the script compiler reads the name)."""

    def __getitem__(self, types):
        return None


BroadcastingList1 = BroadcastingListCls()
BroadcastingList2 = BroadcastingList3 = BroadcastingList1
BroadcastingList4 = BroadcastingList5 = BroadcastingList6 = BroadcastingList1


def _origin(ann):
    return typing.get_origin(ann) or getattr(ann, "__origin__", None)


def is_tuple(ann):
    """True for ``Tuple[...]`` / ``tuple[...]``."""
    return ann is tuple or _origin(ann) is tuple


def is_list(ann):
    """True for ``List[...]`` / ``list[...]``."""
    return ann is list or _origin(ann) is list


def is_dict(ann):
    """True for ``Dict[...]`` / ``dict[...]``."""
    return ann is dict or _origin(ann) is dict


def is_union(ann):
    """True for ``Union[...]`` and ``X | Y``."""
    import types
    return _origin(ann) in (typing.Union, getattr(types, "UnionType", typing.Union))


def is_optional(ann):
    """True for ``Optional[X]`` (a union with None)."""
    return is_union(ann) and type(None) in typing.get_args(ann)


def get_param_names(fn, n_args):
    """The names of ``fn``'s parameters (``n_args`` placeholders when unknown)."""
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return [str(i) for i in range(n_args)]


def try_real_annotations(fn, loc):
    """``(parameter annotations, return annotation)`` from ``fn``'s signature, or None
    when it has none."""
    try:
        sig = inspect.signature(fn)
    except ValueError:
        return None
    all_annots = [sig.return_annotation] + [p.annotation for p in sig.parameters.values()]
    if all(a is inspect.Parameter.empty for a in all_annots):
        return None
    return ([p.annotation for p in sig.parameters.values()], sig.return_annotation)
