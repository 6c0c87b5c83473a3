"""``torch.nn.factory_kwargs``."""


def factory_kwargs(kwargs):
    """The tensor-factory keywords (``device``, ``dtype``, ``memory_format``) in
    ``kwargs``, merged with a ``factory_kwargs`` dict among them; a key given both ways
    or an unknown key is a TypeError. ``None`` gives ``{}``."""
    if kwargs is None:
        return {}
    simple = {"device", "dtype", "memory_format"}
    unknown = kwargs.keys() - (simple | {"factory_kwargs"})
    if unknown:
        raise TypeError(f"unexpected kwargs {unknown}")
    out = dict(kwargs.get("factory_kwargs", {}))
    for key in simple & kwargs.keys():
        if key in out:
            raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
        out[key] = kwargs[key]
    return out
