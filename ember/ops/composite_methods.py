"""Tensor methods (and in-place variants) for functions ember declares as composites in
the ops files (``x.gcd(y)``, ``x.bincount()``, ``x.renorm_(...)``) and in
``ember.linalg`` (``x.orgqr``)."""
from ember._tensor import Tensor
from ember.ops import combinatorics, elementwise_composites, norms, searching, stats
from ember.ops._inplace import inplace_method

__all__ = []


def _bind():
    from ember import linalg  # torch.linalg sits above ops
    functions = {}
    for mod in (elementwise_composites, searching, stats, combinatorics, norms):
        functions.update((name, getattr(mod, name)) for name in mod.__all__)
    for name in ("heaviside", "gcd", "lcm", "ldexp", "frexp", "nextafter", "bincount", "histc",
                 "cov", "corrcoef", "diagflat", "dist", "renorm"):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, functions[name])
    for name in ("heaviside", "gcd", "lcm", "ldexp", "nextafter", "renorm"):
        if not hasattr(Tensor, name + "_"):
            # (ldexp's, nextafter's and renorm's backward read self: keep the old values)
            copies = name in ("ldexp", "nextafter", "renorm")
            setattr(Tensor, name + "_", inplace_method(functions[name], copies))
    if not hasattr(Tensor, "orgqr"):
        Tensor.orgqr = linalg.householder_product


_bind()
