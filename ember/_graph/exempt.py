"""The groups of primitives that no exporter writes, each with its reason: shared by the
TorchScript writer's list (``ember.jit._op_exempt``) and the ONNX exporter's
(``ember.onnx._op_exempt``)."""
from ember import _random_ops
from ember.autograd import function
from ember.nn.modules import _hooks
from ember.ops import (
    _views,
    bitwise,
    conv,
    conversion,
    elementwise,
    extrema,
    linalg_decomp,
    linalg_eig,
    pooling,
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

__all__ = ["exemptions", "FAMILY_BASES", "BACKWARD_ONLY", "RANDOM",
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
