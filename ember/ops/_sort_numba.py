"""``std::sort`` of ``(value, index)`` pairs as a numba kernel (the ``ember[fast]`` extra).

PyTorch's CPU ``sort`` without a stable order runs libstdc++'s ``std::sort`` (introsort:
median-of-three quicksort, heapsort past the depth limit, a final insertion sort) on
each row's pairs, compared by value only; equal values end where its swaps put them.
This is the same sequence of swaps as ``ember.ops._cpu_order.sort`` (the pure Python
reference, used without numba), run over the rows that hold equal values. The keys are
int64 (integers and bool, uint64 shifted to keep its order) or float64 (every float
dtype converts exactly), so two compilations serve every dtype.

The recursion on the upper part of each partition is an explicit stack: the parts are
disjoint, so the order they are sorted in does not change the result.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np

from ember.backend.numba_jit import njit as _jit

__all__ = ["sort_rows"]

_THRESHOLD = 16  # libstdc++'s _S_threshold


@_jit
def _before(x, y, desc):
    """PyTorch's comparators: NaN is the largest (last ascending, first descending)."""
    if desc:
        return (x != x and y == y) or x > y
    return (x == x and y != y) or x < y


@_jit
def _swap(k, v, i, j):
    k[i], k[j] = k[j], k[i]
    v[i], v[j] = v[j], v[i]


@_jit
def _linear_insert(k, v, last, desc):
    key, val = k[last], v[last]
    nxt = last - 1
    while _before(key, k[nxt], desc):
        k[last], v[last] = k[nxt], v[nxt]
        last = nxt
        nxt -= 1
    k[last], v[last] = key, val


@_jit
def _insertion_sort(k, v, first, last, desc):
    if first == last:
        return
    for i in range(first + 1, last):
        if _before(k[i], k[first], desc):
            key, val = k[i], v[i]
            for j in range(i, first, -1):
                k[j], v[j] = k[j - 1], v[j - 1]
            k[first], v[first] = key, val
        else:
            _linear_insert(k, v, i, desc)


@_jit
def _median_to_first(k, v, result, x, y, z, desc):
    if _before(k[x], k[y], desc):
        if _before(k[y], k[z], desc):
            m = y
        elif _before(k[x], k[z], desc):
            m = z
        else:
            m = x
    elif _before(k[x], k[z], desc):
        m = x
    elif _before(k[y], k[z], desc):
        m = z
    else:
        m = y
    _swap(k, v, result, m)


@_jit
def _partition_pivot(k, v, first, last, desc):
    _median_to_first(k, v, first, first + 1, first + (last - first) // 2, last - 1, desc)
    pivot = k[first]
    lo, hi = first + 1, last
    while True:
        while _before(k[lo], pivot, desc):
            lo += 1
        hi -= 1
        while _before(pivot, k[hi], desc):
            hi -= 1
        if not lo < hi:
            return lo
        _swap(k, v, lo, hi)
        lo += 1


@_jit
def _adjust_heap(k, v, first, hole, length, key, val, desc):
    top = child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if _before(k[first + child], k[first + child - 1], desc):
            child -= 1
        k[first + hole], v[first + hole] = k[first + child], v[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        k[first + hole], v[first + hole] = k[first + child - 1], v[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and _before(k[first + parent], key, desc):
        k[first + hole], v[first + hole] = k[first + parent], v[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    k[first + hole], v[first + hole] = key, val


@_jit
def _pop_heap(k, v, first, last, result, desc):
    key, val = k[result], v[result]
    k[result], v[result] = k[first], v[first]
    _adjust_heap(k, v, first, 0, last - first, key, val, desc)


@_jit
def _partial_sort_all(k, v, first, last, desc):
    """``std::partial_sort(first, last, last)``: heapsort of the range."""
    length = last - first
    if length >= 2:
        for parent in range((length - 2) // 2, -1, -1):
            _adjust_heap(k, v, first, parent, length, k[first + parent], v[first + parent],
                         desc)
    middle = last
    while middle - first > 1:
        middle -= 1
        _pop_heap(k, v, first, middle, middle, desc)


@_jit
def _std_sort(k, v, desc, stack):
    n = k.shape[0]
    if n < 2:
        return
    lg = 0
    while (n >> (lg + 1)) > 0:
        lg += 1
    top = 0
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, n, 2 * lg
    top = 1
    while top > 0:
        top -= 1
        first, last, depth = stack[top, 0], stack[top, 1], stack[top, 2]
        while last - first > _THRESHOLD:
            if depth == 0:
                _partial_sort_all(k, v, first, last, desc)
                break
            depth -= 1
            cut = _partition_pivot(k, v, first, last, desc)
            stack[top, 0], stack[top, 1], stack[top, 2] = cut, last, depth
            top += 1
            last = cut
    if n > _THRESHOLD:
        _insertion_sort(k, v, 0, _THRESHOLD, desc)
        for i in range(_THRESHOLD, n):
            _linear_insert(k, v, i, desc)
    else:
        _insertion_sort(k, v, 0, n, desc)


@_jit
def sort_rows(keys, out, rows, desc):
    """For each row ``r`` of ``rows``: ``out[r]`` = the indices ``std::sort`` leaves
    beside the values of ``keys[r]`` (2-D int64 or float64), ascending or ``desc``."""
    n = keys.shape[1]
    k = np.empty(n, keys.dtype)
    v = np.empty(n, np.int64)
    stack = np.empty((2 * 64 + 2, 3), np.int64)
    for r in rows:
        for j in range(n):
            k[j] = keys[r, j]
            v[j] = j
        _std_sort(k, v, desc, stack)
        for j in range(n):
            out[r, j] = v[j]
