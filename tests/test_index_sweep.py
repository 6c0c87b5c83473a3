"""The indexing family swept against torch 2.13.0: every row of the sweep tables
(gather/scatter/index_*, masked/take/put/advanced indexing, views and index
factories) must give torch's outcome: the same exception class, or the same type,
shape, dtype, values, node name and gradients. ``python tests/test_index_sweep.py``
prints the table of cases per op."""
import collections
import sys
import warnings

import pytest
from index_sweep_harness import compare
from index_sweep_masked import CASES as MASKED
from index_sweep_scatter import CASES as SCATTER
from index_sweep_views import CASES as VIEWS

ALL = SCATTER + MASKED + VIEWS


@pytest.mark.parametrize("op,name,fn,rtol", ALL, ids=[f"{c[0]}-{c[1]}" for c in ALL])
def test_sweep(op, name, fn, rtol):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        msg = compare(fn, rtol)
    assert not msg, f"{op} {name}: {msg}"


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
