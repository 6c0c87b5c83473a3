"""Names of the recorded calls that are not primitives, and how an op's export spelling
is found on its class.

A graph node's ``op`` is a primitive's ``_op_name`` when ``node.target`` is a
:class:`~ember.autograd.node.Primitive` subclass; its export spellings are then the
class's ``onnx`` and ``torchscript`` attributes (:func:`spelling`). The few calls the
capture records one level above the primitives (``view``, ``x[key]``, factories, sizes
and arithmetic on them...) have no class to carry a spelling: they are named here, once,
and the exporters' tables for them are keyed by these names (a test checks every key).
"""

# calls recorded by name (the composites that ask the mode stack, ember._graph.capture's
# random ops, sizes, arithmetic on traced ints and ``x[key] = v``)
SHAPE_CALLS = ("view", "reshape", "flatten", "unflatten", "view_as", "reshape_as", "narrow",
               "expand",
               "expand_as", "getitem", "setitem", "detach", "embedding", "embedding_bag",
               "multilabel_margin_loss")
FACTORY_CALLS = ("zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
                 "empty_like", "arange", "eye")
RANDOM_CALLS = ("bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_",
                "cauchy_", "log_normal_", "rand", "randn", "randint", "rand_like",
                "randn_like", "randint_like", "bernoulli", "normal", "multinomial", "poisson",
                "binomial", "randperm")
# the multi-layer recurrent functions (``ember.nn.functional_rnn``: ``torch.lstm``...)
RNN_CALLS = ("lstm", "gru", "rnn_tanh", "rnn_relu")
PACKING_CALLS = ("pack_padded_sequence", "pad_packed_sequence")
# calls whose windows or sampling positions depend on the input's size (``pad``: its
# reflect/replicate/circular modes; ``tensordot``: whether a size-1 contracted dim
# broadcasts)
RESIZE_CALLS = ("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
                "interpolate", "pad", "tensordot")
# orderings: their indices are values of the input, so a trace records the call (an
# order computed at the example would be a constant of the example's values)
SORT_CALLS = ("sort", "argsort", "topk", "kthvalue", "nonzero", "repeat_interleave", "pdist",
              "bucketize", "searchsorted")
# calls that compute from their input's values what their result follows (a permutation
# from pivots, bins from the data's range, a scaling from a norm, a rank, the distinct
# values and their runs, the index rows of a length, a path chosen by the number of rows,
# an inverse's info, Householder reflectors applied one by one, a broadcast batch, the
# exponents of frexp, isin's comparisons): recorded whole
DATA_CALLS = ("lu_unpack", "linalg_lu_solve", "histogram", "linalg_matrix_exp",
              "linalg_matrix_rank", "unique", "unique_consecutive", "combinations", "corrcoef",
              "linalg_inv_ex", "linalg_householder_product", "ormqr", "triangular_solve",
              "frexp", "isin")
# calls whose result's shape (or values) follows the values of an integer or boolean
# tensor argument, which they read outside the ops: a trace records the whole call, and
# a replay computes the shape again (a mask's True count, the largest index...);
# ``hash_tensor``, computed on the elements' bits; ``take_along_dim`` along a dim (its
# broadcast and the wrap of negative indices)
VALUE_CALLS = ("masked_select", "one_hot", "bincount", "gcd", "lcm", "segment_reduce",
               "tensor_split", "ctc_loss", "hash_tensor", "take_along_dim")
# eval-mode batch norm (its training mode is the ``Normalize`` primitive) and instance
# norm (both modes: PyTorch's trace shows aten::instance_norm)
NORM_CALLS = ("batch_norm", "instance_norm")
# calls that read their input's values outside the ops (the ranks of a quantile, a
# factorization's check that raises): recorded whole by ``compile`` alone, run again at
# every replay (``composite_node.compile_recorder``); a trace keeps their ops
COMPILE_CALLS = ("quantile", "nanquantile", "lu", "linalg_lu_factor", "linalg_lu_factor_ex")
# calls given a traced 0-d integer tensor where they use the int in Python (a dim that
# picks a layout, a window, a count, a size list, a number): recorded whole with the
# traced int read from it (``Int``), so a replay runs the call at the value then
INT_ARG_CALLS = ("select", "select_scatter", "glu", "unfold", "rot90", "diff",
                 "linalg_matrix_power", "linalg_vander", "pixel_shuffle", "pixel_unshuffle",
                 "mvlgamma", "constant_pad_nd", "repeat", "hsplit", "vsplit", "dsplit",
                 "nonzero_static", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                 "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
                 "as_strided", "as_strided_scatter", "new_zeros", "new_ones", "new_full",
                 "addmm", "addmv", "baddbmm", "addbmm", "dist", "renorm", "histc",
                 "grid_sampler_2d", "grid_sampler_3d", "im2col", "linalg_vector_norm",
                 "linalg_norm", "linalg_tensorsolve", "norm", "cov", "gradient",
                 "linspace", "logspace", "movedim")
INT_CALLS = ("size", "int.add", "int.sub", "int.mul", "int.floordiv", "int.mod", "int.neg")
RECORDED_CALLS = frozenset(SHAPE_CALLS + FACTORY_CALLS + RANDOM_CALLS + INT_CALLS +
                           RNN_CALLS + PACKING_CALLS + RESIZE_CALLS + SORT_CALLS + NORM_CALLS +
                           VALUE_CALLS + DATA_CALLS + COMPILE_CALLS + INT_ARG_CALLS)

_MISSING = object()


def spelling(target, kind):
    """The ``kind`` spelling (``"onnx"`` or ``"torchscript"``) of a primitive class, or
    None. Found on the class or its bases; a base's *string* spelling names that op only,
    so it reaches a subclass only when the subclass is the same op under another node
    name (a class sharing the ``_op_name``). A callable
    declared on a family base serves the whole family."""
    if not isinstance(target, type):
        return None
    for owner in target.__mro__:
        value = owner.__dict__.get(kind, _MISSING)
        if value is _MISSING:
            continue
        if value is None or owner is target or not isinstance(value, str):
            return value
        return value if _same_op(target, owner) else None
    return None


def _same_op(cls, owner):
    return cls is owner or cls.__dict__.get("_op_name", cls.__name__) == owner._op_name and \
        issubclass(cls, owner)
