"""The groups of primitives that no exporter writes, each with its reason: shared by the
TorchScript writer's list (``ember.jit._op_exempt``) and the ONNX exporter's
(``ember.onnx._op_exempt``)."""
from ember.ops import (
    _linalg_util,
    _views,
    activation_nodes,
    adaptive_pooling,
    attention,
    bitwise,
    composite_node,
    conv,
    conversion,
    diagonals,
    elementwise,
    extrema,
    flat_index,
    identity,
    index_scatter,
    linalg_add,
    linalg_eig,
    losses,
    matmul_graph,
    normalization_grad,
    pooling,
    reduction,
    resample,
    resample_aa,
    rnn,
    rnn_graph,
    sampling,
    scan,
    shape,
    sparse_ops,
    special,
    unary,
    variance,
)

__all__ = ["exemptions", "FAMILY_BASES", "BACKWARD_ONLY", "EAGER_ONLY", "RANDOM",
           "STORAGE", "SPARSE"]


def exemptions(*groups):
    """``{class: reason}`` from ``(reason, class, class, ...)`` groups."""
    return {cls: reason for reason, *classes in groups for cls in classes}


FAMILY_BASES = (
    "a family base class: never recorded itself (its subclasses are)",
    sampling._Sample, _views.ViewPrimitive, bitwise._Bitwise, bitwise._Shift,
    elementwise._Compare, elementwise._MinMax, elementwise._FMinMax, extrema._AmaxAmin,
    extrema._ArgExtreme, extrema._EvenAll, extrema._SelectDim, _linalg_util._SavesOutputs,
    reduction._AllAny, variance._StatMean, variance._VarStd, rnn._Layer, scan._CumExtreme,
    special._IgammaBase, composite_node.CompositeNode, normalization_grad._NormGrads,
    unary._Predicate, unary._Unary)

BACKWARD_ONLY = (
    "made only by backward formulas: traces record forward graphs",
    conv.ConvWeight, adaptive_pooling.AdaptiveAvgPoolAdjoint,
    adaptive_pooling.AdaptiveAvgPool3DAdjoint, pooling.AvgPoolAdjoint, pooling.AvgPool3DAdjoint,
    pooling.PoolScatter3D,
    pooling.PoolScatter, pooling.PoolGather, pooling.ScatterFlat, resample.ResampleAdjoint,
    resample.TakeAdjoint,
    shape.SumToSize, shape.UnfoldBackward, scan.ReverseCumsum, scan.ScatterAddAlong,
    unary.PiecewiseGrad, unary.ReluBackward, unary.SigmoidBackward, unary.TanhBackward,
    unary._ZerosLikeOf, linalg_eig._EigGrad, reduction.ProdOthers, identity._DelayedError,
    identity._Identity, resample_aa._SkippedAxis, activation_nodes.GeluGrad,
    attention.AttentionGrads, normalization_grad.LayerNormGrads,
    normalization_grad.BatchNormGrads, normalization_grad.BatchNormEvalGrads,
    losses._NllLossBackward, losses._NllLoss2dBackward)

EAGER_ONLY = (
    "made only outside graph captures: a capture records the call it stands for instead",
    rnn.MkldnnLSTMLayer, matmul_graph.Addmm, matmul_graph.UnsafeView,
    matmul_graph.Trilinear, flat_index.Take, flat_index.Put, flat_index.MaskedSelect,
    shape.NarrowCopy, diagonals.DiagonalCopy, *composite_node.nodes(),
    *rnn_graph.FUSED_LAYERS)

RANDOM = (
    "a random draw: traces record the public calls (bernoulli_, normal_, rand...) instead",
    sampling._Uniform, sampling._Normal0, sampling._Normal1, sampling._Normal2,
    sampling._Normal3, sampling._Bernoulli0, sampling._Bernoulli1,
    sampling._Bernoulli2, sampling._Random0, sampling._Random1,
    sampling._Random2, sampling._Cauchy, sampling._Exponential,
    sampling._Geometric, sampling._LogNormal, sampling._Poisson,
    sampling._BernoulliP, sampling.StandardGamma, sampling.SampleDirichlet,
    sampling.Dirichlet, sampling._NotDifferentiable, sampling._GradNotDifferentiable)

STORAGE = (
    "reads or writes raw storage positions (or overwrites a tensor): not written",
    _views.AsStrided, _views.AsStridedScatter, index_scatter.AsStridedScatter,
    _views.StorageAsStrided, _views.StorageAsStridedInplace, _views.PutFlat, _views.TakeFlat,
    conversion.Copy,
    conversion.Fill, *conversion._FILLS.values())

SPARSE = (
    "a sparse-layout op: graphs with sparse tensors are not written",
    sparse_ops.FromDense, sparse_ops.Scale, sparse_ops.SparseGather,
    sparse_ops.SparseMmReduce, sparse_ops.SparsePack, sparse_ops.ToDense)


def _eager_graph_nodes():
    """The nodes made only where an eager graph is recorded, to show PyTorch's one node
    for a call ember computes otherwise (``matmul_graph``'s add* products and
    ``composite_node``'s one-node composites, listed with the other eager-only nodes)."""
    return (linalg_add._AddProduct, *linalg_add.ADD_PRODUCTS)


EAGER_ONLY = EAGER_ONLY + _eager_graph_nodes()
