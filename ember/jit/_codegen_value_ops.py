"""TorchScript spellings of the calls a trace records whole because their result's
shape (or values) follows the values of an integer or boolean tensor argument:
``masked_select``, ``one_hot``, ``bincount``, ``gcd``/``lcm``, ``segment_reduce``,
``tensor_split`` at a tensor of indices, ``ctc_loss``; ``hash_tensor``, computed on
the elements' bits; ``take_along_dim`` along a dim; and the calls whose result follows
the input's values (``kthvalue``'s order, ``lu_unpack``/``lu_solve``'s permutation from
the pivots, ``histogram``'s edges, ``matrix_exp``'s scaling, ``matrix_rank``, ``unique``'s distinct
values and ``unique_consecutive``'s runs, ``combinations``' index rows, ``corrcoef``'s
path for one row, ``linalg_inv_ex``'s info, ``linalg_householder_product`` and ``ormqr``'s
reflectors for the sizes at hand, ``triangular_solve``'s broadcast batch, ``frexp``'s
exponents, ``isin``'s comparisons). Written
as the aten call on the traced values, so a saved trace computes them at run time, as
PyTorch's does."""
from ember._graph.ir import Ref
from ember.jit._codegen_emitter import emits, literal

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


@emits("masked_select")
def _masked_select(em, node, input, mask):
    return f"torch.masked_select({em.e(input)}, {em.e(mask)})"


@emits("one_hot")
def _one_hot(em, node, tensor, num_classes=-1):
    return f"torch.one_hot({em.e(tensor)}, {em.e(num_classes)})"


@emits("bincount")
def _bincount(em, node, input, weights=None, minlength=0):
    return f"torch.bincount({em.e(input)}, {em.e(weights)}, {em.e(minlength)})"


@emits("gcd")
def _gcd(em, node, input, other):
    return f"torch.gcd({em.e(input)}, {em.e(other)})"


@emits("lcm")
def _lcm(em, node, input, other):
    return f"torch.lcm({em.e(input)}, {em.e(other)})"


@emits("segment_reduce")
def _segment_reduce(em, node, data, reduce, *, lengths=None, indices=None, offsets=None,
                    axis=0, unsafe=False, initial=None):
    return (f"torch.segment_reduce({em.e(data)}, {literal(reduce)}, lengths={em.e(lengths)}, "
            f"indices={em.e(indices)}, offsets={em.e(offsets)}, axis={em.e(axis)}, "
            f"unsafe={em.e(unsafe)}, initial={em.e(initial)})")


@emits("tensor_split")
def _tensor_split(em, node, input, indices_or_sections, dim=0):
    parts = em.tmp(f"torch.tensor_split({em.e(input)}, {em.e(indices_or_sections)}, "
                   f"{em.e(dim)})")
    return [f"{parts}[{i}]" for i in range(len(node.outputs))]


@emits("ctc_loss")
def _ctc_loss(em, node, log_probs, targets, input_lengths, target_lengths, blank=0,
              reduction="mean", zero_infinity=False):
    return (f"torch.ctc_loss({em.e(log_probs)}, {em.e(targets)}, {em.e(input_lengths)}, "
            f"{em.e(target_lengths)}, {em.e(blank)}, {_REDUCTIONS[reduction]}, "
            f"{em.e(zero_infinity)})")


@emits("hash_tensor")
def _hash_tensor(em, node, input, dim=None, keepdim=False, mode=0):
    dims = em.ints(() if dim is None else (dim,) if isinstance(dim, int) else tuple(dim))
    return (f"torch.hash_tensor({em.e(input)}, {dims}, keepdim={em.e(keepdim)}, "
            f"mode={em.e(mode)})")


@emits("take_along_dim")
def _take_along_dim(em, node, input, indices, dim=None):
    return f"torch.take_along_dim({em.e(input)}, {em.e(indices)}, {em.e(dim)})"


@emits("kthvalue")
def _kthvalue(em, node, input, k, dim=-1, keepdim=False, out=None):
    res = em.tmp(f"torch.kthvalue({em.e(input)}, {em.e(k)}, {em.e(dim)}, "
                 f"{literal(bool(keepdim))})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("lu_unpack")
def _lu_unpack(em, node, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, out=None):
    res = em.tmp(f"torch.lu_unpack({em.e(LU_data)}, {em.e(LU_pivots)}, "
                 f"{literal(bool(unpack_data))}, {literal(bool(unpack_pivots))})")
    return [f"{res}[{i}]" for i in range(3)]


@emits("linalg_lu_solve")
def _linalg_lu_solve(em, node, LU, pivots, B, left=True, adjoint=False, out=None):
    return (f"torch.linalg_lu_solve({em.e(LU)}, {em.e(pivots)}, {em.e(B)}, "
            f"left={literal(bool(left))}, adjoint={literal(bool(adjoint))})")


@emits("histogram")
def _histogram(em, node, input, bins=100, range=None, weight=None, density=False, out=None):
    # TorchScript's overload with a tensor of bin edges takes no ``range``
    spread = "" if isinstance(bins, bool) or not isinstance(bins, int) else \
        f"range={em.e(range)}, "
    res = em.tmp(f"torch.histogram({em.e(input)}, {em.e(bins)}, {spread}"
                 f"weight={em.e(weight)}, density={literal(bool(density))})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("linalg_matrix_exp")
def _linalg_matrix_exp(em, node, A):
    return f"torch.linalg_matrix_exp({em.e(A)})"


@emits("linalg_matrix_rank")
def _linalg_matrix_rank(em, node, A, atol=None, rtol=None, hermitian=False, out=None):
    return (f"torch.linalg_matrix_rank({em.e(A)}, atol={em.e(atol)}, rtol={em.e(rtol)}, "
            f"hermitian={literal(bool(hermitian))})")


def _picked(em, call, node, return_inverse, return_counts):
    """aten's (values, inverse, counts) unpacked where the call is made (all three: a
    pair would not unpack the triple); the items the call returned."""
    names = [em.tmp_name() for _ in range(3)]
    em.lines.append(f"{', '.join(names)} = {call}")
    picks = [0] + [1] * bool(return_inverse) + [2] * bool(return_counts)
    return [names[i] for i in picks] if node.multi else names[0]


@emits("unique")
def _unique(em, node, input, sorted=True, return_inverse=False, return_counts=False,
            dim=None):
    flags = (f"{literal(bool(sorted))}, {literal(bool(return_inverse))}, "
             f"{literal(bool(return_counts))}")
    # PyTorch's torch.unique calls aten::_unique2, or aten::unique_dim along a dim
    call = f"torch._unique2({em.e(input)}, {flags})" if dim is None else \
        f"torch.unique_dim({em.e(input)}, {em.e(dim)}, {flags})"
    return _picked(em, call, node, return_inverse, return_counts)


@emits("unique_consecutive")
def _unique_consecutive(em, node, input, return_inverse=False, return_counts=False, dim=None):
    call = (f"torch.unique_consecutive({em.e(input)}, {literal(bool(return_inverse))}, "
            f"{literal(bool(return_counts))}, {em.e(dim)})")
    return _picked(em, call, node, return_inverse, return_counts)


@emits("combinations")
def _combinations(em, node, input, r=2, with_replacement=False):
    return f"torch.combinations({em.e(input)}, {em.e(r)}, {literal(bool(with_replacement))})"


@emits("corrcoef")
def _corrcoef(em, node, input):
    return f"torch.corrcoef({em.e(input)})"


@emits("linalg_inv_ex")
def _linalg_inv_ex(em, node, A, check_errors=False, out=None):
    res = em.tmp(f"torch.linalg_inv_ex({em.e(A)}, check_errors={literal(bool(check_errors))})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("linalg_householder_product")
def _linalg_householder_product(em, node, A, tau, out=None):
    return f"torch.linalg_householder_product({em.e(A)}, {em.e(tau)})"


@emits("ormqr")
def _ormqr(em, node, input, tau, other, left=True, transpose=False, out=None):
    return (f"torch.ormqr({em.e(input)}, {em.e(tau)}, {em.e(other)}, "
            f"{literal(bool(left))}, {literal(bool(transpose))})")


@emits("triangular_solve")
def _triangular_solve(em, node, b, A, upper=True, transpose=False, unitriangular=False,
                      out=None):
    res = em.tmp(f"torch.triangular_solve({em.e(b)}, {em.e(A)}, {literal(bool(upper))}, "
                 f"{literal(bool(transpose))}, {literal(bool(unitriangular))})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("frexp")
def _frexp(em, node, input):
    res = em.tmp(f"torch.frexp({em.e(input)})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("isin")
def _isin(em, node, elements, test_elements, assume_unique=False, invert=False):
    return (f"torch.isin({em.e(elements)}, {em.e(test_elements)}, "
            f"assume_unique={literal(bool(assume_unique))}, invert={literal(bool(invert))})")


@emits("embedding_bag")
def _embedding_bag(em, node, input, weight, offsets=None, max_norm=None, norm_type=2,
                   scale_grad_by_freq=False, mode="mean", sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """``torch.embedding_bag(weight, indices, offsets, ...)[0]``: a 2-D input is
    flattened with offsets every row, as ``F.embedding_bag`` does in PyTorch."""
    if max_norm is not None:
        raise NotImplementedError("jit codegen: embedding_bag(max_norm=...)")
    i = em.e(input)
    if len(node.inputs[0].shape) == 2:
        offsets = f"torch.arange(0, torch.numel({i}), torch.size({i}, 1))"
        i = f"torch.reshape({i}, [-1])"
    else:
        offsets = em.e(offsets)
    n = node.inputs[1].shape[0] if offsets is not None else 0
    if isinstance(padding_idx, Ref):  # a traced 0-d tensor: wrapped at run time, as eager
        k = f"int({em.e(padding_idx)})" if padding_idx.value.type == "Tensor" else \
            em.e(padding_idx)
        pad = f"({k} % torch.size({em.e(weight)}, 0))"
    else:
        pad = literal(None if padding_idx is None else
                      (padding_idx + n if padding_idx < 0 else padding_idx))
    modes = {"sum": 0, "mean": 1, "max": 2}
    return (f"torch.embedding_bag({em.e(weight)}, {i}, {offsets}, "
            f"{literal(bool(scale_grad_by_freq))}, {modes[mode]}, {literal(bool(sparse))}, "
            f"{em.e(per_sample_weights)}, {literal(bool(include_last_offset))}, {pad})[0]")
