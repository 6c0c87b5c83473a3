"""Function-level batching rules: ember composites that read values on the way (a host
bounds check, an ``.item()`` test, index parsing, sorting on raw arrays, random
factories).  Each such function is marked ``ember.autograd._modes.routed``: while a
``vmap`` level is visible on the mode stack, a call of it is offered to the level
(``_LevelMode.call``), which runs the rule made here from the function itself: the rule
handles batched arguments and calls the function for everything else.  The table is
keyed by the functions, not by names."""
from ember import _core as ember
from ember._tensor import Tensor
from ember.func._batched import NoRule, wrap
from ember.ops._batch import _shift


def _nll_rule(orig):
    """``nll_loss``'s composite checks its targets on the host and tests the total weight
    with ``.item()``; on a batch the check covers every sample at once and the empty-total
    case is a ``where`` (NaN value, zero gradient, as PyTorch's)."""
    def _nll(input, target, weight, ignore_index, reduction):
        from ember.func._batched import bottom, is_batched
        if not (is_batched(input) or is_batched(target) or is_batched(weight)):
            return orig(input, target, weight, ignore_index, reduction)
        # the composite itself (``orig``: the unrouted function)
        return orig(input, target, weight, ignore_index, reduction,
                    host_of=lambda t: bottom(t)._host())
    return _nll


def _convert_item_rule(orig):
    """A batched index tensor stays an array (a ``BArr``) even when each sample's index
    is 0-dim: ``x[i]`` then gathers one row per sample (see ``_getitem_advanced``)."""
    def _convert_item(i):
        from ember.func._batched import BArr
        if isinstance(i, Tensor) and type(i._data) is BArr:
            k = i._data.dtype.kind
            if k not in "iu" or i._data.dtype == "uint8":
                raise NoRule("indexing with a batched float, bool or uint8 mask (its result "
                             "size depends on each sample's values)")
            return i._data
        return orig(i)
    return _convert_item


def _parse_index_rule(orig):
    """``parse_index`` moves index arrays to the indexed tensor's array module; a batched
    tensor's module is that of the arrays underneath."""
    def parse_index(idx, shape, like=None):
        from ember.func._batched import BArr
        while type(like) is BArr:
            like = like.value._data
        return orig(idx, shape, like)
    return parse_index


def _sort_indices_rule(orig):
    """The sorting family (sort, argsort, topk, kthvalue, msort) orders raw arrays in
    ``_indices``; for a batched input the underlying tensor is ordered along the shifted
    dim, and the values are then gathered by the batched ``Gather`` rule."""
    def _indices(input, dim, descending, stable=True):
        from ember.func._batched import BArr
        d = input._data
        if type(d) is not BArr:
            return orig(input, dim, descending, stable)
        if d.ndim == 0:
            return orig(ember.zeros(()), 0, descending)  # a scalar's index is 0
        return wrap(_indices(d.value, _shift(dim, d.ndim), descending, stable), d.level)
    return _indices


def _cpu_choice_rule(orig):
    """The tie-breaking pass of topk/kthvalue works row by row along ``dim``: for a batched
    input it runs on the underlying arrays with the dim shifted past the batch."""
    def _cpu_choice(input, dim, idx, k, fix_row, needs, ref):
        from ember.func._batched import BArr
        d = input._data
        if type(d) is not BArr:
            return orig(input, dim, idx, k, fix_row, needs, ref)
        parts = [t._data for t in (idx, ref)]
        if any(type(p) is not BArr or p.level != d.level for p in parts):
            raise NoRule("topk/kthvalue ties with unbatched indices")
        out = orig(d.value, _shift(dim, d.ndim), parts[0].value, k, fix_row, needs,
                   parts[1].value)
        return wrap(out, d.level)
    return _cpu_choice


def _check_indices_rule(orig):
    """``embedding``'s bounds check reads the indices: for a batch, all of them at once
    (the lookup itself is the batched ``GetItemAdvanced`` rule)."""
    def _check_indices(input, num):
        from ember.func._batched import bottom
        return orig(bottom(input), num)
    return _check_indices


def _table():
    import ember.nn._functional_losses as losses
    import ember.nn.functional as F
    from ember import _random_ops as R
    from ember.func._batched import random_rule
    from ember.ops import indexing, sorting
    table = {sorting._indices: _sort_indices_rule,
             sorting._cpu_choice: _cpu_choice_rule,
             F._check_indices: _check_indices_rule,
             losses._nll: _nll_rule,
             indexing._convert_item: _convert_item_rule,
             indexing.parse_index: _parse_index_rule}
    for fn in (R.rand, R.randn, R.rand_like, R.randn_like, R.randint_like, F._noise):
        table[fn] = (lambda name: lambda orig: random_rule(name, orig))(fn.__name__)
    for fn in table:
        if getattr(fn, "__wrapped__", None) is None:
            raise TypeError(f"{fn.__module__}.{fn.__name__} has a vmap rule but is not "
                            "marked _modes.routed, so vmap would never see its calls")
    return {fn: make(fn.__wrapped__) for fn, make in table.items()}


FUNCTION_RULES = {}  # routed function -> its rule (filled on first use)


def rule_for(fn):
    """The function-level batching rule of the routed function ``fn``, or None."""
    if not FUNCTION_RULES:
        FUNCTION_RULES.update(_table())
    return FUNCTION_RULES.get(fn)
