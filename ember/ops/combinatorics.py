"""Combinatorics of tensors, as composites of ember ops (no derivative code of their own):
``cartesian_prod``, ``combinations``, ``block_diag``, ``diagflat``."""
import itertools

import numpy as np

from ember._factory import empty, zeros
from ember._tensor import _make, _mode_active, _mode_recorder
from ember.backend.dtypes import promote_types
from ember.ops.diagonals import diag
from ember.ops.join import cat, meshgrid, stack

__all__ = ["cartesian_prod", "combinations", "block_diag", "diagflat"]


def cartesian_prod(*tensors):
    """All tuples with one element from each 1-D tensor, as rows."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], dim=1)


def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of a 1-D tensor's elements, as rows."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return empty(0, dtype=input.dtype)
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node: the index rows are built from the length (a capture would keep the
        # example's)
        return m.composite_locals("combinations", combinations, locals())
    n = input.shape[0]
    gen = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    idx = np.array(list(gen(range(n), r)), dtype=np.int64).reshape(-1, r)
    if idx.size == 0:
        return input[_make(np.zeros((0, r), dtype=np.int64))]
    return input[_make(idx)]


def block_diag(*tensors):
    """A block-diagonal matrix of the given 0-, 1- or 2-D tensors."""
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return empty(1, 0)
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = promote_types(dtype, m.dtype)
    cols = sum(m.shape[1] for m in mats)
    parts, c0 = [], 0
    for m in mats:
        left = zeros(m.shape[0], c0, dtype=dtype)
        right = zeros(m.shape[0], cols - c0 - m.shape[1], dtype=dtype)
        parts.append(cat([left, m.to(dtype), right], dim=1))
        c0 += m.shape[1]
    return cat(parts, dim=0)


def diagflat(input, offset=0):
    """A 2-D tensor with the flattened input on diagonal ``offset``."""
    return diag(input.reshape(-1), offset)
