"""Primitives with no TorchScript spelling, each with the reason (the groups shared with
the ONNX exporter's list, ``ember.onnx._op_exempt``, are defined here).

``tests/test_op_spellings.py`` checks that every primitive has a ``torchscript``
spelling (``ember.jit._op_names.spelling``) or is listed here; a new op without either
fails it. Tracing one of these and writing the trace's code raises
``NotImplementedError`` naming the op and the user's line.
"""
from ember import _random_ops
from ember.autograd import function
from ember.nn.modules import _hooks
from ember.ops import (
    _einsum,
    _views,
    bitwise,
    conv,
    conversion,
    ctc,
    diagonals,
    elementwise,
    extrema,
    fft,
    gather_scatter,
    indexing,
    linalg_decomp,
    linalg_eig,
    linalg_lu,
    nn_fused,
    pooling,
    power,
    reduction,
    resample,
    resample_aa,
    rnn,
    sampling,
    scan,
    scatter_extras,
    shape,
    sparse_ops,
    special,
    unary,
)

__all__ = ["NO_TORCHSCRIPT", "exemptions", "FAMILY_BASES", "BACKWARD_ONLY", "RANDOM",
           "STORAGE", "SPARSE"]


def exemptions(*groups):
    """``{class: reason}`` from ``(reason, class, class, ...)`` groups."""
    return {cls: reason for reason, *classes in groups for cls in classes}


FAMILY_BASES = (
    "a family base class: never recorded itself (its subclasses are)",
    _random_ops._Sample, _views.ViewPrimitive, bitwise._Bitwise, bitwise._Shift,
    elementwise._Compare, elementwise._MinMax, elementwise._FMinMax, extrema._AmaxAmin,
    extrema._ArgExtreme, extrema._EvenAll, extrema._SelectDim, linalg_decomp._SavesOutputs,
    reduction._AllAny, reduction._VarStd, rnn._Layer, scan._CumExtreme, special._IgammaBase,
    unary._Predicate, unary._Unary)

BACKWARD_ONLY = (
    "made only by backward formulas: traces record forward graphs",
    conv.ConvInput, conv.ConvWeight, pooling.AvgPoolAdjoint, pooling.PoolScatter,
    pooling.PoolGather, pooling.ScatterFlat, resample.ResampleAdjoint, resample.TakeAdjoint,
    shape.SumToSize, shape.UnfoldBackward, scan.ReverseCumsum, scan.ScatterAddAlong,
    unary.PiecewiseGrad, unary.ReluBackward, unary.SigmoidBackward, unary.TanhBackward,
    unary._ZerosLikeOf, linalg_eig._EigGrad, reduction.ProdOthers, function._DelayedError,
    _hooks._Identity, resample_aa._SkippedAxis)

RANDOM = (
    "a random draw: traces record the public calls (bernoulli_, normal_, rand...) instead",
    _random_ops._Uniform, _random_ops._Normal0, _random_ops._Normal1, _random_ops._Normal2,
    _random_ops._Normal3, _random_ops._Bernoulli0, _random_ops._Bernoulli1,
    _random_ops._Bernoulli2, _random_ops._Random0, _random_ops._Random1,
    _random_ops._Random2, _random_ops._Cauchy, _random_ops._Exponential,
    _random_ops._Geometric, _random_ops._LogNormal, _random_ops._Poisson,
    _random_ops._BernoulliP, sampling.StandardGamma)

STORAGE = (
    "reads or writes raw storage positions (or overwrites a tensor): not written",
    _views.AsStrided, _views.AsStridedScatter, scatter_extras.AsStridedScatter,
    _views.StorageAsStrided, _views.PutFlat, _views.TakeFlat, conversion.Copy,
    conversion.Fill, *conversion._FILLS.values())

SPARSE = (
    "a sparse-layout op: graphs with sparse tensors are not written",
    sparse_ops.FromDense, sparse_ops.Scale, sparse_ops.SparseGather,
    sparse_ops.SparseMmReduce, sparse_ops.SparsePack, sparse_ops.ToDense)

# the arguments of these differ from the aten schema's (axis lists, NumPy dtypes, host
# index arrays, several ember ops for one aten op): each needs an emitter, not yet written
_NOT_YET = (
    "its arguments differ from its aten schema's; no emitter written yet",
    _einsum.DiagEmbed, _einsum.Diagonal, _einsum.Einsum, conv.Fold, conv.Unfold,
    ctc.CtcNll, diagonals.DiagEmbed, diagonals.Diagonal, diagonals.DiagonalScatter,
    elementwise.TruncDivide, extrema._MaxAll, extrema._MinAll, extrema._MedianAll,
    extrema._MedianDim, extrema._ModeDim, extrema._NanmedianAll, extrema._NanmedianDim,
    fft.FftC2C, fft.FftC2R, fft.FftR2C, gather_scatter.IndexAdd, gather_scatter.IndexCopy,
    gather_scatter.IndexFill, gather_scatter.Scatter, gather_scatter.ScatterAdd,
    gather_scatter.ScatterReduce, indexing.GetItem, indexing.GetItemAdvanced,
    indexing.IndexPut, indexing.IndexScatter, indexing.MaskedScatter, linalg_decomp.Cholesky,
    linalg_decomp.Eigh, linalg_decomp.Pinv, linalg_decomp.Qr, linalg_decomp.Slogdet,
    linalg_decomp.Solve, linalg_decomp.Svd, linalg_decomp.VectorNorm, linalg_eig.Eig,
    linalg_lu.Geqrf, linalg_lu.LuFactorEx, nn_fused.BinaryCrossEntropy, nn_fused._CrossEntropy,
    pooling.AdaptiveMaxPool, pooling.AvgPool, pooling.GatherFlat, power.RPowScalar,
    reduction.Nansum, reduction.Prod, reduction.ProdDim, reduction._All, reduction._Any,
    reduction._CountNonzero, reduction._Std, reduction._Var, resample.Resample, resample.Take,
    rnn.PackPadded, rnn.PadPacked, rnn.PadSequence, scan.Cumprod, scan.GatherAlong,
    scan._Concat, scan._Cummax, scan._Cummin, shape.Select, shape.Unfold)

NO_TORCHSCRIPT = exemptions(FAMILY_BASES, BACKWARD_ONLY, RANDOM, STORAGE, SPARSE,
                            _NOT_YET)
