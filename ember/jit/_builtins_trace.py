"""TorchScript builtins that traced code uses and that ``_builtins`` does not adapt
(additive rows of the one table, kept in their own file to keep merges easy)."""
from ember.jit._builtins import TABLE, register


def _add(name, fn):
    if name not in TABLE:   # jit-load's own row, when there is one, wins
        register(name)(fn)


def _vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):
    from ember import linalg
    return linalg.vector_norm(x, ord, dim, keepdim)


def _split_with_sizes(x, sizes, dim=0):
    return list(x.split(list(sizes), dim))


_add("torch.linalg_vector_norm", _vector_norm)
_add("torch.split_with_sizes", _split_with_sizes)


def _index(x, indices):
    """``aten::index(self, Tensor?[] indices)``: advanced indexing, None = the whole dim."""
    key = tuple(slice(None) if i is None else i for i in indices)
    return x[key]


def _leaky_relu(x, negative_slope=0.01):
    from ember.nn import functional as F
    return F.leaky_relu(x, negative_slope)


def _max_pool3d(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    from ember.nn import functional as F
    return F.max_pool3d(x, kernel_size, stride or None, padding, dilation, ceil_mode)


_add("torch.index", _index)
_add("torch.leaky_relu", _leaky_relu)
_add("torch.max_pool3d", _max_pool3d)


def _fill(x, value):
    """``aten::fill.Scalar``/``fill.Tensor``: a new tensor like ``x`` filled with ``value``."""
    return x.clone().fill_(value)


_add("torch.fill", _fill)


def _linalg_matrix_exp(A):
    from ember import linalg
    return linalg.matrix_exp(A)


def _linalg_matrix_rank(A, atol=None, rtol=None, hermitian=False):
    from ember import linalg
    return linalg.matrix_rank(A, atol=atol, rtol=rtol, hermitian=hermitian)


def _linalg_lu_solve(LU, pivots, B, left=True, adjoint=False):
    from ember import linalg
    return linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)


# the calls a trace records whole because their results follow their inputs' values
_add("torch.linalg_matrix_exp", _linalg_matrix_exp)
_add("torch.linalg_matrix_rank", _linalg_matrix_rank)
_add("torch.linalg_lu_solve", _linalg_lu_solve)


def _all_three(values, inverse, counts, return_inverse, return_counts):
    """aten's (values, inverse, counts), empty where not asked for, as torch returns."""
    import ember
    empty = ember.empty(0, dtype=ember.int64)
    return values, inverse if return_inverse else empty, counts if return_counts else empty


def _unique2(x, sorted=True, return_inverse=False, return_counts=False):
    import ember
    values, inverse, counts = ember.unique(x, sorted, True, True)
    return _all_three(values, inverse, counts, return_inverse, return_counts)


def _unique_dim(x, dim, sorted=True, return_inverse=False, return_counts=False):
    import ember
    values, inverse, counts = ember.unique(x, sorted, True, True, dim)
    return _all_three(values, inverse, counts, return_inverse, return_counts)


def _unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    import ember
    values, inverse, counts = ember.unique_consecutive(x, True, True, dim)
    return _all_three(values, inverse, counts, return_inverse, return_counts)


# aten's unique calls, which return all three tensors
_add("torch._unique2", _unique2)
_add("torch.unique_dim", _unique_dim)
_add("torch.unique_consecutive", _unique_consecutive)


def _linalg_inv_ex(A, check_errors=False):
    from ember import linalg
    return tuple(linalg.inv_ex(A, check_errors=check_errors))


def _linalg_householder_product(A, tau):
    from ember import linalg
    return linalg.householder_product(A, tau)


_add("torch.linalg_inv_ex", _linalg_inv_ex)
_add("torch.linalg_householder_product", _linalg_householder_product)


def _linalg_matrix_power(A, n):
    from ember import linalg
    return linalg.matrix_power(A, n)


def _linalg_vander(x, N=None):
    from ember import linalg
    return linalg.vander(x, N=N)


# calls a trace records whole for an int read from a traced 0-d tensor
_add("torch.linalg_matrix_power", _linalg_matrix_power)
_add("torch.linalg_vander", _linalg_vander)


def _grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    import ember
    return ember.grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners)


def _grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    import ember
    return ember.grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners)


def _im2col(input, kernel_size, dilation, padding, stride):
    from ember.nn import functional as F
    return F.unfold(input, kernel_size, dilation, padding, stride)


_add("torch.grid_sampler_2d", _grid_sampler_2d)
_add("torch.grid_sampler_3d", _grid_sampler_3d)
_add("torch.im2col", _im2col)


def _linalg_norm(A, ord=None, dim=None, keepdim=False, dtype=None):
    from ember import linalg
    return linalg.norm(A, ord, dim, keepdim, dtype=dtype)


def _linalg_tensorsolve(A, B, dims=None):
    from ember import linalg
    return linalg.tensorsolve(A, B, dims)


_add("torch.linalg_norm", _linalg_norm)
_add("torch.linalg_tensorsolve", _linalg_tensorsolve)


def _nuclear_norm(x, dim, keepdim=False):
    import ember
    return ember.norm(x, "nuc", dim, keepdim)


def _frobenius_norm(x, dim, keepdim=False):
    import ember
    return ember.norm(x, "fro", dim, keepdim)


_add("torch.nuclear_norm", _nuclear_norm)
_add("torch.frobenius_norm", _frobenius_norm)


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """``aten::embedding_bag``: the bags' reductions first (the other three outputs are
    the kernel's workspaces, which traced code does not read: empty here)."""
    import ember
    from ember.nn import functional as F
    out = F.embedding_bag(indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq,
                          mode=("sum", "mean", "max")[mode], sparse=sparse,
                          per_sample_weights=per_sample_weights,
                          include_last_offset=include_last_offset, padding_idx=padding_idx)
    empty = ember.empty(0, dtype=ember.int64)
    return out, empty, empty, empty


_add("torch.embedding_bag", _embedding_bag)
