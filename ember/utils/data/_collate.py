"""``default_collate`` and ``default_convert``: turn a list of samples into a batch."""
import collections.abc
import re

import numpy as np

__all__ = ["default_collate", "default_convert", "CollateError"]

_NP_STR = re.compile(r"[SaUO]")


class CollateError(RuntimeError):
    """A batch could not be built from its samples (names the shapes and where)."""


def default_convert(data):
    """Convert NumPy arrays (nested in containers) to tensors, leaving the rest alone."""
    import ember
    if isinstance(data, ember.Tensor):
        return data
    if isinstance(data, np.ndarray):
        if _NP_STR.search(data.dtype.str):
            return data
        return ember.as_tensor(data)
    if isinstance(data, np.generic):
        return ember.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()}) \
            if not isinstance(data, dict) or type(data) is dict else \
            {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


def _describe(x):
    import ember
    if isinstance(x, (ember.Tensor, np.ndarray)):
        return f"{type(x).__name__} of shape {tuple(x.shape)}"
    return type(x).__name__


def default_collate(batch, _path=""):
    """Stack a list of samples into a batch, as ``torch.utils.data.default_collate``.

    Tensors and NumPy arrays are stacked along a new first dim; Python floats become
    a float64 tensor, ints an int64 tensor, bools a bool tensor; strings stay a list;
    mappings, namedtuples, tuples and lists are collated field by field.
    """
    import ember
    elem = batch[0]
    where = f" at {_path}" if _path else ""
    if isinstance(elem, ember.Tensor):
        shapes = [tuple(x.shape) for x in batch]
        if any(s != shapes[0] for s in shapes):
            bad = next(i for i, s in enumerate(shapes) if s != shapes[0])
            raise CollateError(
                f"default_collate: stack expects each tensor to be equal size{where}, but "
                f"sample 0 has shape {shapes[0]} and sample {bad} has shape {shapes[bad]} "
                f"(shapes in this batch: {sorted(set(shapes))})")
        return ember.stack(batch, 0)
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic):
        if isinstance(elem, np.ndarray) and _NP_STR.search(elem.dtype.str):
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, "
                            f"numbers, dicts or lists; found {elem.dtype}")
        return default_collate([ember.as_tensor(np.asarray(b)) for b in batch], _path)
    if isinstance(elem, bool):
        return ember.tensor(batch, dtype=ember.bool)
    if isinstance(elem, float):
        return ember.tensor(batch, dtype=ember.float64)
    if isinstance(elem, int):
        return ember.tensor(batch, dtype=ember.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        out = {k: default_collate([d[k] for d in batch], f"{_path}[{k!r}]") for k in elem}
        try:
            return type(elem)(out) if type(elem) is not dict else out
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s), f"{_path}.{f}")
                            for f, s in zip(elem._fields, zip(*batch))))
    if isinstance(elem, collections.abc.Sequence):
        n = len(elem)
        if any(len(e) != n for e in batch):
            raise CollateError(f"each element in list of batch should be of equal size{where}")
        transposed = list(zip(*batch))
        items = [default_collate(list(s), f"{_path}[{i}]") for i, s in enumerate(transposed)]
        if isinstance(elem, tuple):
            return items
        try:
            return type(elem)(items)
        except TypeError:
            return items
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")
