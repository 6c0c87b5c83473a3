"""Primitives with no TorchScript spelling, each with the reason (the groups shared with
the ONNX exporter's list are in ``ember._graph.exempt``).

``tests/test_op_spellings.py`` checks that every primitive has a ``torchscript``
spelling (``ember._graph.names.spelling``) or is listed here; a new op without either
fails it. Tracing one of these and writing the trace's code raises
``NotImplementedError`` naming the op and the user's line.
"""
from ember._graph.exempt import (
    BACKWARD_ONLY,
    EAGER_ONLY,
    FAMILY_BASES,
    RANDOM,
    SPARSE,
    STORAGE,
    exemptions,
)
from ember.ops import (
    _einsum,
    adaptive_pooling,
    conv,
    conversion,
    ctc,
    diagonals,
    fft,
    gather_scatter,
    index_along,
    index_scatter,
    indexing,
    linalg_decomp,
    linalg_eig,
    linalg_lu,
    linalg_solve,
    masking,
    pooling,
    power,
    reduction,
    resample,
    rnn_packing,
    scan,
    shape,
    vector_norms,
)

__all__ = ["NO_TORCHSCRIPT"]

# the arguments of these differ from the aten schema's (axis lists, NumPy dtypes, host
# index arrays, several ember ops for one aten op): each needs an emitter, not yet written
_NOT_YET = (
    "its arguments differ from its aten schema's; no emitter written yet",
    index_along.IndexFillValue, gather_scatter.ScatterValue, gather_scatter.ScatterReduceArg,
    index_scatter.IndexReduce,
    indexing.SetItemCopy, indexing.SetItemSlices,
    _einsum.DiagEmbed, _einsum.Diagonal, _einsum.Einsum, conv.Fold, conv.Unfold,
    ctc.CtcNll, diagonals.DiagonalScatter,
    fft.FftC2C, fft.FftC2R, fft.FftR2C, index_along.IndexAdd,
    index_along.IndexFill, gather_scatter.Scatter,
    gather_scatter.ScatterReduce, indexing.GetItemAdvanced,
    indexing.IndexPut, indexing.IndexScatter, masking.MaskedScatter, linalg_decomp.Cholesky,
    linalg_decomp.CholeskyLegacy, diagonals.SelectScatter, diagonals.SliceScatter,
    linalg_decomp.Eigh, linalg_decomp.Pinv, linalg_decomp.Qr, linalg_solve.Slogdet,
    linalg_solve.Solve, linalg_decomp.Svd, vector_norms.VectorNorm, linalg_eig.Eig,
    linalg_lu.Geqrf, linalg_lu.LuFactorEx,
    pooling.GatherFlat, power.RPowScalar, pooling.MaxUnpool, pooling.MaxUnpool3D,
    adaptive_pooling.AdaptiveAvgPool, adaptive_pooling.AdaptiveAvgPool3D,
    reduction._CountNonzero, resample.Resample, resample.Take,
    rnn_packing.PackPadded, rnn_packing.PadPacked, rnn_packing.PadSequence,
    scan.GatherAlong, shape.Unfold)

# the fills are written (``torch.fill``); the rest of the storage group is not
_STORAGE = tuple(c for c in STORAGE if not (isinstance(c, type) and
                                            issubclass(c, conversion.Fill)))
NO_TORCHSCRIPT = exemptions(FAMILY_BASES, BACKWARD_ONLY, EAGER_ONLY, RANDOM, _STORAGE, SPARSE,
                            _NOT_YET)
