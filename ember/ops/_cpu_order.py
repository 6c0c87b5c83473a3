"""Which of several equal elements PyTorch's CPU kernels pick.

``topk``, ``kthvalue`` and ``mode`` return the index of one of several equal values;
PyTorch's CPU kernels choose by the exact sequence of swaps of the C++ standard
library's selection and sort algorithms (introselect, introsort, heaps; libstdc++, as
PyTorch's Linux wheels are built with it) or of ATen's own quickselect. To give the
same indices on ties, a row that has ties is reordered here by the same algorithms,
on Python lists of ``(value, index)`` pairs compared by value only. Rows without ties
never come here: any correct algorithm gives the same answer for them.
"""

_THRESHOLD = 16  # libstdc++'s _S_threshold: below it, insertion sort


def _lg(n):
    return n.bit_length() - 1


def _insertion_sort(a, first, last, comp):
    if first == last:
        return
    for i in range(first + 1, last):
        val = a[i]
        if comp(val, a[first]):
            a[first + 1:i + 1] = a[first:i]
            a[first] = val
        else:
            _linear_insert(a, i, comp)


def _linear_insert(a, last, comp):
    val = a[last]
    nxt = last - 1
    while comp(val, a[nxt]):
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = val


def _median_to_first(a, result, x, y, z, comp):
    if comp(a[x], a[y]):
        if comp(a[y], a[z]):
            m = y
        elif comp(a[x], a[z]):
            m = z
        else:
            m = x
    elif comp(a[x], a[z]):
        m = x
    elif comp(a[y], a[z]):
        m = z
    else:
        m = y
    a[result], a[m] = a[m], a[result]


def _partition_pivot(a, first, last, comp):
    _median_to_first(a, first, first + 1, first + (last - first) // 2, last - 1, comp)
    pivot, lo, hi = a[first], first + 1, last
    while True:
        while comp(a[lo], pivot):
            lo += 1
        hi -= 1
        while comp(pivot, a[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _adjust_heap(a, first, hole, length, value, comp):
    top = child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if comp(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and comp(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


def _pop_heap(a, first, last, result, comp):
    value = a[result]
    a[result] = a[first]
    _adjust_heap(a, first, 0, last - first, value, comp)


def _heap_select(a, first, middle, last, comp):
    length = middle - first
    if length >= 2:
        for parent in range((length - 2) // 2, -1, -1):
            _adjust_heap(a, first, parent, length, a[first + parent], comp)
    for i in range(middle, last):
        if comp(a[i], a[first]):
            _pop_heap(a, first, middle, i, comp)


def partial_sort(a, first, middle, last, comp):
    """``std::partial_sort``: the smallest ``middle - first`` (by ``comp``) first, sorted."""
    _heap_select(a, first, middle, last, comp)
    while middle - first > 1:
        middle -= 1
        _pop_heap(a, first, middle, middle, comp)


def _introsort_loop(a, first, last, depth, comp):
    while last - first > _THRESHOLD:
        if depth == 0:
            partial_sort(a, first, last, last, comp)
            return
        depth -= 1
        cut = _partition_pivot(a, first, last, comp)
        _introsort_loop(a, cut, last, depth, comp)
        last = cut


def sort(a, first, last, comp):
    """``std::sort`` (introsort, then a final insertion sort)."""
    if last - first < 2:
        return
    _introsort_loop(a, first, last, 2 * _lg(last - first), comp)
    if last - first > _THRESHOLD:
        _insertion_sort(a, first, first + _THRESHOLD, comp)
        for i in range(first + _THRESHOLD, last):
            _linear_insert(a, i, comp)
    else:
        _insertion_sort(a, first, last, comp)


def nth_element(a, first, nth, last, comp):
    """``std::nth_element`` (introselect)."""
    if first == last or nth == last:
        return
    depth = 2 * _lg(last - first)
    while last - first > 3:
        if depth == 0:
            _heap_select(a, first, nth + 1, last, comp)
            a[first], a[nth] = a[nth], a[first]
            return
        depth -= 1
        cut = _partition_pivot(a, first, last, comp)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(a, first, last, comp)


def _isnan(v):
    return v != v  # (for bfloat16's scalars too, which are no Python floats)


def _greater(x, y):  # NaN is the largest, as PyTorch's comparators say
    return (_isnan(x[0]) and not _isnan(y[0])) or x[0] > y[0]


def _less(x, y):
    return (not _isnan(x[0]) and _isnan(y[0])) or x[0] < y[0]


def topk_row(values, k, largest, sorted_):
    """The indices PyTorch's CPU ``topk`` returns for one row (a list of numbers)."""
    a = [(v, i) for i, v in enumerate(values)]
    comp = _greater if largest else _less
    if k * 64 <= len(a):
        partial_sort(a, 0, k, len(a), comp)
    else:
        nth_element(a, 0, k - 1, len(a), comp)
        if sorted_:
            sort(a, 0, k - 1, comp)
    return [i for _, i in a[:k]]


def kthvalue_row(values, k):
    """The index PyTorch's CPU ``kthvalue`` returns for one row: ATen's quickselect
    (median-of-three pivot) on ``(value, index)`` pairs, ``k`` counting from 0."""
    a = [(v, i) for i, v in enumerate(values)]
    lo, hi = 0, len(a) - 1

    def gt(x, y):
        return _greater(x, y)

    while True:
        if hi <= lo:
            return a[k][1]
        if hi == lo + 1:
            if gt(a[lo], a[hi]):
                a[lo], a[hi] = a[hi], a[lo]
            return a[k][1]
        p = lo + (hi - lo) // 2
        a[p], a[lo + 1] = a[lo + 1], a[p]
        if gt(a[lo + 1], a[hi]):
            a[lo + 1], a[hi] = a[hi], a[lo + 1]
        if gt(a[lo], a[hi]):
            a[lo], a[hi] = a[hi], a[lo]
        if gt(a[lo + 1], a[lo]):
            a[lo + 1], a[lo] = a[lo], a[lo + 1]
        i, j, piv = lo + 1, hi, a[lo]
        while True:
            i += 1
            while gt(piv, a[i]):
                i += 1
            j -= 1
            while gt(a[j], piv):
                j -= 1
            if j < i:
                break
            a[i], a[j] = a[j], a[i]
        a[lo], a[j] = a[j], a[lo]
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1


def mode_row(values):
    """The (value, index) PyTorch's CPU ``mode`` returns for one row: ``std::sort`` of
    the pairs by value, then the last element of the first most frequent run."""
    a = [(v, i) for i, v in enumerate(values)]
    sort(a, 0, len(a), lambda x, y: x[0] < y[0])
    best = best_i = None
    run = max_run = 0
    for n, (v, i) in enumerate(a):
        run += 1
        if n == len(a) - 1 or a[n + 1][0] != v:
            if run > max_run:
                best, best_i, max_run = v, i, run
            run = 0
    return best, best_i
