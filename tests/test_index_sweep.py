"""The indexing family swept against torch 2.13.0: every row of the sweep tables
(gather/scatter/index_*, masked/take/put/advanced indexing, views and index
factories) must give torch's outcome: the same exception class, or the same type,
shape, dtype, values, node name and gradients. ``python tests/test_index_sweep.py``
prints the table of cases per op."""
import collections
import sys
import warnings

import pytest
import torch
from index_sweep_harness import compare
from index_sweep_masked import CASES as MASKED
from index_sweep_scatter import CASES as SCATTER
from index_sweep_views import CASES as VIEWS

import ember

ALL = SCATTER + MASKED + VIEWS

# the rows where ember stays different on purpose (docs/differences.md, "Indexing and
# scatters"): the part of the difference report that must remain, and why
_SRC_BIGGER = ("backward: ember ok", "PyTorch documents scatter's backward for src.shape == "
               "index.shape only and raises for a larger src; ember's gradient is the "
               "gather, zero-padded to src's shape")
_TIES = ("grad[1]", "PyTorch's amax/amin gradient counts an excluded input "
         "(include_self=False) among the ties and under-shares the sources; ember shares "
         "among the candidates only, so the gradients sum to the incoming one")
_CHALF = ("NotImplementedError: a float16 tensor with a complex Python number",
          "complex32 arithmetic is not implemented in ember")
_SPARSE = ("sparse False != True", "gather(sparse_grad=True) gives a dense gradient: ember "
           "has no sparse gradients in autograd")
KNOWN = {
    ("gather", "sparse_grad_true"): _SPARSE,
    ("scatter", "grad_src_self"): _SRC_BIGGER,
    ("scatter", "grad_src_bigger"): _SRC_BIGGER,
    ("scatter", "empty_index"): _SRC_BIGGER,
    ("scatter_add", "src_bigger_grad"): _SRC_BIGGER,
    ("scatter_reduce", "amax_exc_ties_grad"): _TIES,
    ("scatter_reduce", "amin_exc_ties_grad"): _TIES,
    ("where", "tensor_f16_scalar_complex"): _CHALF,
    ("where", "scalar_complex_tensor_f16"): _CHALF,
    ("where", "tensor0d_f16_scalar_complex"): _CHALF,
}


@pytest.mark.parametrize("op,name,fn,rtol", ALL, ids=[f"{c[0]}-{c[1]}" for c in ALL])
def test_sweep(op, name, fn, rtol):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        msg = compare(fn, rtol)
    known = KNOWN.get((op, name))
    if known is not None:
        assert known[0] in msg, f"{op} {name}: the documented difference changed: {msg!r}"
        return
    assert not msg, f"{op} {name}: {msg}"


def test_known_differences_are_rows():
    names = {(op, name) for op, name, _, _ in ALL}
    assert set(KNOWN) <= names


def test_tie_gradients_sum_to_incoming():
    """ember's amax gradient with an excluded input that ties: the shares of the sources
    sum to the incoming gradient (gradcheck agrees away from the ties)."""
    import ember
    x = ember.tensor([1.0, 2.0, 0.0], dtype=ember.float64, requires_grad=True)
    src = ember.tensor([1.0, 1.0, 2.0, 0.5], dtype=ember.float64, requires_grad=True)
    out = x.scatter_reduce(0, ember.tensor([0, 0, 1, 2]), src, "amax", include_self=False)
    out.backward(ember.tensor([1.0, 1.0, 1.0], dtype=ember.float64))
    assert src.grad.tolist() == [0.5, 0.5, 1.0, 1.0]
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def main():
    """Print op: cases, equal, differing, then each difference."""
    rows = collections.OrderedDict()
    diffs = []
    for op, name, fn, rtol in ALL:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            msg = compare(fn, rtol)
        r = rows.setdefault(op, [0, 0])
        r[0] += 1
        if msg and (op, name) in KNOWN:
            msg = "(documented) " + msg
        if msg:
            r[1] += 1
            diffs.append(f"  {op} {name}: {msg}")
    print(f"{'op':22s} cases equal differing")
    for op, (n, d) in rows.items():
        print(f"{op:22s} {n:5d} {n - d:5d} {d:9d}")
    total = sum(n for n, _ in rows.values())
    bad = sum(d for _, d in rows.values())
    print(f"{'total':22s} {total:5d} {total - bad:5d} {bad:9d}")
    print("\n".join(diffs))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "bool"])
def test_an_empty_index_of_any_dtype_gathers_and_scatters_nothing(dtype):
    """PyTorch checks an index's dtype only where it has elements for gather and the
    scatters (index_select, take and index_add refuse it even empty)."""
    for m in (torch, ember):
        x = m.ones(5, 3)
        i = m.zeros(0, 1, dtype=getattr(m, dtype))
        assert m.gather(x, 0, i).shape == (0, 1)
        assert m.equal(x.scatter_add(0, i, m.zeros(0, 1)), x)
        assert m.equal(x.scatter(0, i, 2.0), x)
        assert m.equal(x.scatter_reduce(0, i, m.zeros(0, 1), "amax"), x)
        with pytest.raises(RuntimeError):
            x.index_add(0, i.reshape(0), m.zeros(0, 3))
