"""Flatten parameters into one vector and back."""
from ember import _core as ember
from ember._tensor import Tensor
from ember.nn.utils._lazy import refuse_uninitialized

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param, old):
    if old is None:
        return param.device
    if param.device != old:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return old


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter, flattened and concatenated (differentiable)."""
    device = None
    vec = []
    for p in parameters:
        refuse_uninitialized([p], "parameters_to_vector")
        device = _check_same_device(p, device)
        vec.append(p.reshape(-1))
    return ember.cat(vec)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (their ``.data``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device = None
    pointer = 0
    for p in parameters:
        refuse_uninitialized([p], "vector_to_parameters")
        device = _check_same_device(p, device)
        n = p.numel()
        p.data = vec[pointer:pointer + n].view_as(p).data
        pointer += n
