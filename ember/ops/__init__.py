"""ember's ops, one module per family. Importing this package binds every Tensor method."""
from ember.ops import (  # noqa: F401
    adaptive_pooling,
    bitwise,
    complex_numbers,
    conv,
    conversion,
    diagonals,
    elementwise,
    extrema,
    flat_index,
    gather_scatter,
    index_along,
    indexing,
    join,
    linalg,
    linalg_decomp,
    linalg_solve,
    masking,
    normalization,
    pooling,
    power,
    reduction,
    resample,
    sampling,
    scan,
    shape,
    softmaxes,
    sorting,
    special,
    unary,
    variance,
    vector_norms,
)
from ember.ops.adaptive_pooling import *  # noqa: F401,F403
from ember.ops.bitwise import *  # noqa: F401,F403
from ember.ops.complex_numbers import *  # noqa: F401,F403
from ember.ops.conv import *  # noqa: F401,F403
from ember.ops.conversion import *  # noqa: F401,F403
from ember.ops.diagonals import *  # noqa: F401,F403
from ember.ops.elementwise import *  # noqa: F401,F403
from ember.ops.extrema import *  # noqa: F401,F403
from ember.ops.flat_index import *  # noqa: F401,F403
from ember.ops.gather_scatter import *  # noqa: F401,F403
from ember.ops.index_along import *  # noqa: F401,F403
from ember.ops.indexing import *  # noqa: F401,F403
from ember.ops.join import *  # noqa: F401,F403
from ember.ops.linalg import *  # noqa: F401,F403
from ember.ops.linalg_decomp import *  # noqa: F401,F403
from ember.ops.linalg_solve import *  # noqa: F401,F403
from ember.ops.masking import *  # noqa: F401,F403
from ember.ops.normalization import *  # noqa: F401,F403
from ember.ops.pooling import *  # noqa: F401,F403
from ember.ops.power import *  # noqa: F401,F403
from ember.ops.reduction import *  # noqa: F401,F403
from ember.ops.resample import *  # noqa: F401,F403
from ember.ops.sampling import *  # noqa: F401,F403
from ember.ops.scan import *  # noqa: F401,F403
from ember.ops.shape import *  # noqa: F401,F403
from ember.ops.softmaxes import *  # noqa: F401,F403
from ember.ops.sorting import *  # noqa: F401,F403
from ember.ops.special import *  # noqa: F401,F403
from ember.ops.unary import *  # noqa: F401,F403
from ember.ops.variance import *  # noqa: F401,F403
from ember.ops.vector_norms import *  # noqa: F401,F403

# `from ember.ops import *` gives the ops, not the family modules (so that, e.g.,
# `ember.conv` or `ember.shape` do not appear as stray attributes of `ember`)
__all__ = sorted({name for module in (adaptive_pooling, bitwise, conv, conversion, diagonals,
                                      elementwise, extrema, flat_index, gather_scatter, index_along,
                                      indexing,
                                      join, linalg, linalg_decomp, linalg_solve, masking,
                                      normalization, pooling, power,
                                      reduction, resample, scan, shape, sampling, softmaxes,
                                      sorting, special, unary, variance, vector_norms,
                                      complex_numbers)
                  for name in getattr(module, "__all__", ())})
# composites of the ops above, by family (no derivative code of their own)
from ember.ops import (  # noqa: E402,F401
    combinatorics,  # cartesian_prod, block_diag ...
    elementwise_composites,  # gcd, lcm, ldexp, frexp ...
    integration,  # trapezoid, cumulative_trapezoid ...
    norms,  # dist, renorm
    searching,  # bincount, histc, bucketize, isin ...
    view_copies,  # diagonal_copy, slice_copy ...
)
from ember.ops.combinatorics import *  # noqa: E402,F401,F403
from ember.ops.elementwise_composites import *  # noqa: E402,F401,F403
from ember.ops.integration import *  # noqa: E402,F401,F403
from ember.ops.norms import *  # noqa: E402,F401,F403
from ember.ops.searching import *  # noqa: E402,F401,F403
from ember.ops.view_copies import *  # noqa: E402,F401,F403

__all__ += (searching.__all__ + combinatorics.__all__ + integration.__all__ + norms.__all__
            + elementwise_composites.__all__ + view_copies.__all__)
from ember.ops import linalg_add  # noqa: E402,F401  (addmm, addmv, addr, baddbmm, addbmm)
from ember.ops.linalg_add import *  # noqa: E402,F401,F403

__all__ += linalg_add.__all__
from ember.ops import linalg_lu  # noqa: E402,F401  (lu, lu_unpack, triangular_solve, ormqr ...)
from ember.ops.linalg_lu import *  # noqa: E402,F401,F403

__all__ += linalg_lu.__all__
from ember.ops import stats  # noqa: E402,F401  (quantile, histogram, cov, corrcoef ...)
from ember.ops.stats import *  # noqa: E402,F401,F403

__all__ += stats.__all__
from ember.ops import index_scatter  # noqa: E402,F401  (index_reduce, as_strided_scatter)
from ember.ops.index_scatter import *  # noqa: E402,F401,F403

__all__ += index_scatter.__all__
from ember.ops import memory  # noqa: E402,F401  (empty_permuted, resize_, hash_tensor ...)
from ember.ops.memory import *  # noqa: E402,F401,F403

__all__ += memory.__all__
from ember.ops import finite_diff  # noqa: E402,F401  (gradient)
from ember.ops.finite_diff import *  # noqa: E402,F401,F403

__all__ += finite_diff.__all__
from ember.ops import native_norms  # noqa: E402,F401  (native_batch_norm, native_layer_norm ...)
from ember.ops.native_norms import *  # noqa: E402,F401,F403

__all__ += native_norms.__all__
from ember.ops import lowrank  # noqa: E402,F401  (svd_lowrank, pca_lowrank)
from ember.ops.lowrank import *  # noqa: E402,F401,F403

__all__ += lowrank.__all__
from ember.ops import composite_methods  # noqa: E402,F401  (Tensor.gcd, .bincount, .orgqr ...)
from ember.ops.grid_sample import grid_sampler, grid_sampler_2d, grid_sampler_3d  # noqa: E402,F401

__all__ += ["grid_sampler", "grid_sampler_2d", "grid_sampler_3d"]
from ember.ops import quantization  # noqa: E402,F401  (fake_quantize_per_tensor_affine ...)
from ember.ops.quantization import *  # noqa: E402,F401,F403

__all__ += quantization.__all__


def __getattr__(name):
    # torch.ops.NS.NAME: operators registered with ember.library (torch.library); none
    # exist until that module is loaded
    import sys
    library = sys.modules.get("ember.library")
    ns = None if library is None else library.namespace(name)
    if ns is None:
        raise AttributeError(f"module 'ember.ops' has no attribute '{name}'")
    return ns
