"""The reductions swept against torch 2.13.0 (tests/reduction_sweep_cases.py): every
row must give torch's outcome -- the same exception class, or the same type, shape,
dtype, values (NaN places and the sign of zero included), node name and gradients --
unless the difference is one documented in docs/differences.md ("Reductions swept
against PyTorch"), matched below by op and message. ``python
tests/test_reduction_sweep.py`` prints the table of cases per op."""
import collections
import re
import sys
import warnings

import pytest
from index_sweep_harness import compare
from reduction_sweep_cases import CASES

import ember

# (ops, case-name pattern, message pattern, why ember stays different)
KNOWN = [
    (("std", "var", "std_mean", "var_mean"), r"dim=\(\)", r"^grad\[0\]: values",
     "PyTorch's backward reads dim=() as no dims (an infinite gradient) while its forward "
     "reduces all; ember's gradient is that of the full reduction it computed"),
    (("logsumexp",), r"dim=\(\)", r"torch raises RuntimeError: output with shape",
     "PyTorch's logsumexp with dim=() fails writing its result; ember reduces all dims"),
    (("var", "var_mean"), r"^0d_.*correction=[25]", r"^grad\[0\]: values",
     "a 0-d input with correction > 1: PyTorch's gradient is NaN, ember's is finite "
     "(the value, NaN or inf, agrees)"),
    (None, r"dim=\(.*\)|dim=[12]", r"(raise \w+ \(|torch raises RuntimeError: dim \d appears "
     r"multiple times|ember raises IndexError: Dimension out of range)",
     "which of two errors comes first (a bad dim or dtype), a repeated dim on a 0-d "
     "input, or a dim out of range on an empty input that PyTorch never checks"),
    (None, r"", r"(raise|raises) NotImplementedError \(?\"(max|min)_values_cpu\"|"
     r"raise NotImplementedError \(\"median_out\"|NotImplementedError: \"median_cpu\" not "
     r"implemented for 'Bool'|raise NotImplementedError \(\"cum(max|min)_cpu\"|raise Runtime"
     r"Error \(nansum on CPU does not support complex",
     "complex amax/amin and bool median: ember refuses the dtype where PyTorch's check "
     "order lets an empty or 0-d input through, or reports a bad dim first"),
    (("nanmean_dtype",), r"", r"could not infer output dtype",
     "nanmean(dtype=integer) of a floating input: PyTorch refuses, ember casts first"),
    (("std_mean", "var_mean", "cumprod", "logcumsumexp", "norm"), r"^(sp|big)_c64",
     r"values",
     "complex inputs with NaN/inf: which of the real and imaginary parts become NaN "
     "(and logcumsumexp's imaginary part, equal modulo 2*pi)"),
    (("logcumsumexp",), r"^big_c64", r"values", "imaginary part equal modulo 2*pi"),
    (("nansum", "nanmean", "logsumexp"), r"_(f16|bf16)_", r"^out: values",
     "half precision: PyTorch's summation order over a transposed input (one rounding)"),
]


def _known(op, name, msg):
    for ops, name_pat, msg_pat, _ in KNOWN:
        if (ops is None or op in ops) and re.search(name_pat, name) and \
                re.search(msg_pat, msg):
            return True
    return False


def _rows():
    rows = collections.OrderedDict()
    for op, name, fn, rtol in CASES:
        rows.setdefault(op, []).append((name, fn, rtol))
    return rows


ROWS = _rows()


def _run(op):
    diffs = []
    for name, fn, rtol in ROWS[op]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            msg = compare(fn, rtol)
        if msg:
            diffs.append((name, msg, _known(op, name, msg)))
    return diffs


@pytest.mark.parametrize("op", list(ROWS))
def test_sweep(op):
    bad = [f"{name}: {msg[:300]}" for name, msg, known in _run(op) if not known]
    assert not bad, f"{op}: {len(bad)} rows differ from torch:\n" + "\n".join(bad[:20])


def test_sweep_is_wide():
    assert len(CASES) > 20000
    assert {"sum", "quantile", "nanquantile", "vector_norm", "mode", "cummax"} <= set(ROWS)


def test_fixed_rows_stay_fixed():
    """Rows this sweep found wrong, as plain checks (each differed from torch before)."""
    nan, inf = float("nan"), float("inf")
    t = ember.tensor([[0.0, 1.0], [2.0, 3.0]])
    assert t.all(dim=()).tolist() == [[False, True], [True, True]]  # reduces nothing
    assert ember.nansum(t.half(), dtype=ember.float64).dtype == ember.float64
    assert ember.cumsum(t.half(), 0, dtype=ember.float64).dtype == ember.float64
    b = ember.tensor([[nan, 1.0, 2.0]]).bfloat16()
    assert ember.median(b).isnan().item() and ember.median(b, 1).values.isnan().item()
    e = ember.zeros(0, dtype=ember.int32)
    assert ember.median(e).dtype == ember.int32 and ember.median(e).item() == -2 ** 31
    m = ember.mean(ember.zeros(0, dtype=ember.complex64))
    assert m.real.isnan().item() and m.imag.isnan().item()
    r = ember.nanquantile(ember.tensor([1.0, -inf, -0.0, nan]), 0.4)
    assert r.item() == -inf
    assert ember.lerp(ember.tensor(-0.0), ember.tensor(-0.0), 0.5).signbit().item()
    x = ember.randn(3, 4, requires_grad=True)
    assert ember.quantile(x, 0.3, dim=0).grad_fn.name() == "SqueezeBackward4"
    with pytest.raises(RuntimeError, match="complex"):
        ember.nansum(ember.tensor([1j]))
    with pytest.raises(NotImplementedError):
        ember.cummax(ember.tensor([1j, 2]), 0)
    with pytest.raises(RuntimeError, match="infer output dtype"):
        ember.mean(t, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="Autograd not support dtype: Long"):
        ember.sum(x, dtype=ember.int64)
    with ember.no_grad():
        assert ember.cumsum(x, 0, dtype=ember.int64).dtype == ember.int64
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        ember.tensor(1.0).sum((0, -1))


def main():
    """Print op: cases, equal, documented, differing, then the undocumented ones."""
    print(f"{'op':22s} cases equal documented differing")
    lines, totals = [], [0, 0, 0]
    for op in ROWS:
        diffs = _run(op)
        n, k = len(ROWS[op]), sum(1 for d in diffs if d[2])
        u = len(diffs) - k
        totals = [totals[0] + n, totals[1] + k, totals[2] + u]
        print(f"{op:22s} {n:5d} {n - k - u:5d} {k:10d} {u:9d}")
        lines += [f"  {op} {name}: {msg[:200]}" for name, msg, known in diffs if not known]
    n, k, u = totals
    print(f"{'total':22s} {n:5d} {n - k - u:5d} {k:10d} {u:9d}")
    print("\n".join(lines))
    return 1 if u else 0


if __name__ == "__main__":
    sys.exit(main())
