"""Primitives with no ONNX spelling, each with the reason.

``tests/test_op_spellings.py`` checks that every primitive has an ``onnx`` spelling
(``ember._graph.names.spelling``) or is listed here; a new op without either fails it.
Exporting a graph that holds one of these raises ``UnsupportedOnnxExport`` naming the op
and the user's line.
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
    bitwise,
    complex_numbers,
    conv,
    ctc,
    diagonals,
    elementwise,
    extrema,
    fft,
    gather_scatter,
    index_along,
    index_scatter,
    indexing,
    linalg,
    linalg_decomp,
    linalg_eig,
    linalg_lu,
    linalg_solve,
    losses,
    masking,
    normalization,
    normalization_nodes,
    pooling,
    power,
    reduction,
    resample,
    rnn_packing,
    scan,
    shape,
    softmaxes,
    special,
    unary,
    variance,
    vector_norms,
)

__all__ = ["NO_ONNX"]

_COMPLEX = (
    "complex numbers: ONNX tensors have no complex element type",
    complex_numbers.Angle, complex_numbers.Complex, complex_numbers.Conj,
    complex_numbers.ConjPhysical, complex_numbers.ConjPhysicalInplace, complex_numbers.Imag,
    complex_numbers.Polar, complex_numbers.Real, complex_numbers.ViewAsComplex,
    complex_numbers.ViewAsReal,
    fft.FftC2C, fft.FftC2R, fft.FftR2C)

_DECOMPOSITIONS = (
    "a matrix factorization or solve: ONNX has no such operator",
    linalg_decomp.Cholesky, linalg_decomp.CholeskyLegacy, linalg_decomp.Eigh,
    linalg_solve.Inv, linalg_decomp.Pinv,
    linalg_decomp.Qr, linalg_solve.Slogdet, linalg_solve.Solve, linalg_decomp.Svd,
    linalg_eig.Eig, linalg_lu.Geqrf, linalg_lu.LuFactorEx)

_NO_OPERATOR = (
    "no ONNX operator computes it in one node; a composite converter is not written yet",
    adaptive_pooling.FractionalMaxPool, adaptive_pooling.FractionalMaxPool3D,
    unary.deg2rad.primitive, unary.erfc.primitive, unary.erfinv.primitive,
    unary.exp2.primitive, unary.frac.primitive, unary.log10.primitive, unary.log2.primitive,
    unary.rad2deg.primitive, unary.sinc.primitive, unary.trunc.primitive,
    unary.isfinite.primitive, unary.isneginf.primitive, unary.isposinf.primitive,
    unary.signbit.primitive, unary.Logit, unary.NanToNum, special.lgamma.primitive,
    special.digamma.primitive, special.i0.primitive, special.special_i0e.primitive,
    special.special_i1.primitive, special.special_i1e.primitive,
    special.special_erfcx.primitive, special.special_ndtr.primitive,
    special.special_ndtri.primitive, special.special_log_ndtr.primitive,
    special.special_entr.primitive, special.Igamma, special.Igammac, special.Polygamma,
    special.PolygammaInplace, special.Xlog1py, special.Zeta, elementwise.Atan2,
    elementwise.Fmax, elementwise.Fmin, elementwise.Hypot, elementwise.Lerp, elementwise.LerpTensor,
    elementwise.Nextafter, elementwise.TruncDivide, elementwise.Xlogy, power.RPowScalar,
    bitwise.LeftShift, bitwise.RightShift, linalg.Cdist, linalg.Cross,
    vector_norms.VectorNorm, scan.Logcumsumexp, scan.Cumprod, scan._Cummax, scan._Cummin,
    softmaxes._Logsumexp, reduction.Nansum, reduction.Prod, reduction.ProdDim, reduction._All,
    reduction._Any, reduction._CountNonzero, variance._Std, variance._Var)

_NOT_YET = (
    "ONNX has an equivalent (ScatterElements, Einsum...); no converter written yet",
    extrema._Aminmax, variance._StdMean,
    variance._VarMean,
    index_along.IndexFillValue, gather_scatter.ScatterValue, gather_scatter.ScatterReduceArg,
    index_scatter.IndexReduce,
    indexing.GetItemAlias,
    indexing.GetItemUnsqueeze, indexing.SetItemCopy, indexing.SetItemSlices,
    _einsum.DiagEmbed, _einsum.Diagonal, _einsum.Einsum, conv.Fold, conv.Unfold, ctc.CtcNll,
    diagonals.DiagEmbed, diagonals.Diagonal, diagonals.DiagonalScatter, extrema._MaxAll,
    extrema._MinAll, extrema._MedianAll,
    extrema._MedianDim, extrema._ModeDim, extrema._NanmedianAll, extrema._NanmedianDim,
    index_along.IndexAdd, index_along.IndexCopy, index_along.IndexFill,
    gather_scatter.Scatter, gather_scatter.ScatterAdd, gather_scatter.ScatterReduce,
    indexing.GetItem, indexing.GetItemAdvanced, indexing.IndexPut, indexing.IndexScatter,
    diagonals.SelectScatter, diagonals.SliceScatter,
    masking.MaskedScatter, losses.MultiMarginLoss, losses.MultilabelMarginLoss,
    normalization.Normalize, adaptive_pooling.AdaptiveMaxPool,
    pooling.GatherFlat, resample.Resample, resample.Take,
    adaptive_pooling.AdaptiveMaxPool3D, pooling.MaxUnpool, pooling.MaxUnpool3D,
    adaptive_pooling.AdaptiveAvgPool, adaptive_pooling.AdaptiveAvgPool3D, rnn_packing.PackPadded,
    rnn_packing.PadPacked, rnn_packing.PadSequence, scan.GatherAlong, shape.Select,
    shape.Unfold)

# batch norm over the (C,) parameters: eager only (a capture records Normalize, which
# its TorchScript spelling, inherited, also writes; group norm's eager node inherits
# _GroupNorm's ONNX spelling)
_EAGER_NORM = ("made only outside graph captures: a capture records Normalize instead",
               normalization_nodes._BatchNorm)

NO_ONNX = exemptions(FAMILY_BASES, BACKWARD_ONLY, EAGER_ONLY, RANDOM, STORAGE, SPARSE, _COMPLEX,
                     _DECOMPOSITIONS, _NO_OPERATOR, _NOT_YET, _EAGER_NORM)
