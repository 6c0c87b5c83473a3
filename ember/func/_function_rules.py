"""Function-level batching rules: ember composites that read values on the way (a host
bounds check, an ``.item()`` test, index parsing, sorting on raw arrays, random
factories).  Each such function is marked ``ember.autograd._modes.routed``: while a
``vmap`` level is visible on the mode stack, a call of it is offered to the level
(``_LevelMode.routed_call``), which runs the rule made here from the function itself: the rule
handles batched arguments and calls the function for everything else.  The table is
keyed by the functions, not by names."""
from ember import _core as ember
from ember._tensor import Tensor
from ember.func._batched import NoRule, Refused, wrap
from ember.ops._batch import _shift

# PyTorch's words for a result whose shape depends on the values of each sample
_DYNAMIC = "vmap: We do not support batching operators that can support dynamic shape. "


def _dynamic_shape_rule(orig):
    """nonzero, unique: the result's length is each sample's own, so vmap refuses (as
    PyTorch's does) rather than loop and stack whatever lengths the samples happen to
    share."""
    def refuse(input, *args, **kwargs):
        from ember.func._batched import is_batched
        if is_batched(input):
            raise Refused("vmap: We do not support batching operators that can output "
                          f"dynamic shape. Attempted to vmap over {orig.__name__}.")
        return orig(input, *args, **kwargs)
    return refuse


_INPLACE = ("vmap: inplace arithmetic(self, *extra_args) is not possible because there "
            "exists a Tensor `other` in extra_args that has more elements than `self`. This "
            "happened due to `other` being vmapped over but `self` not being vmapped over in "
            "a vmap. Please try to use out-of-place operators instead of inplace arithmetic. "
            "If said operator is being called inside the PyTorch framework, please file a "
            "bug report instead.")


def _check_writes_rule(orig):
    """An in-place write of a batched value into a tensor without that batch: PyTorch
    refuses, and so does vmap here (its per-sample loop would write every sample into
    the same memory in turn)."""
    def check_writes(targets, sources, message=None):
        from ember.func._batched import _chain, note_writes
        note_writes(targets)
        have = {lv.id for s in sources for lv in _chain(s)}
        for t in targets:
            if isinstance(t, Tensor) and have - {lv.id for lv in _chain(t)}:
                raise Refused(message or _INPLACE)
    return check_writes


def _like_rule(orig):
    """``zeros_like``/``ones_like``/``empty_like``/``full_like`` of a batched tensor: the
    factory on the tensor underneath, so that each sample gets its own (as in PyTorch's
    vmap; ``empty_like(x).copy_(x)`` then writes each sample into its own memory)."""
    def like(input, *args, **kwargs):
        from ember.func._batched import BArr
        d = input._data if isinstance(input, Tensor) else None
        if type(d) is not BArr:
            return orig(input, *args, **kwargs)
        return wrap(like(d.value, *args, **kwargs), d.level)
    return like


def _masked_select_rule(orig):
    """masked_select with a batched mask: each sample's mask counts its own elements, so
    vmap refuses, as PyTorch's does (a batched input alone runs as an index op)."""
    def masked_select(input, mask, **kwargs):
        from ember.func._batched import is_batched
        if is_batched(mask):
            raise Refused("vmap: Attempted to vmap over `mask` in torch.masked_select(self, "
                          "mask) We cannot support this because for each batch this would "
                          "return a differently shaped Tensor.")
        return orig(input, mask, **kwargs)
    return masked_select


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
            if k == "b" or i._data.dtype == "uint8":
                raise Refused(_DYNAMIC + "Attempting to batch over indexing with a boolean "
                              "mask.")
            if k not in "iu":
                raise NoRule("indexing with a batched float index")
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
    from ember import _factory
    from ember import _random_ops as R
    from ember.func._batched import random_rule
    from ember.ops import _inplace, flat_index, indexing, masking, sorting
    table = {sorting._indices: _sort_indices_rule,
             _factory.zeros_like: _like_rule, _factory.ones_like: _like_rule,
             _factory.empty_like: _like_rule, _factory.full_like: _like_rule,
             _inplace.check_writes: _check_writes_rule,
             masking.nonzero: _dynamic_shape_rule,
             sorting.unique: _dynamic_shape_rule,
             flat_index.masked_select: _masked_select_rule,
             sorting._cpu_choice: _cpu_choice_rule,
             F._check_indices: _check_indices_rule,
             losses._nll: _nll_rule,
             indexing._convert_item: _convert_item_rule,
             indexing.parse_index: _parse_index_rule}
    for fn in (R.rand, R.randn, R.rand_like, R.randn_like, R.randint_like, F._noise):
        table[fn] = (lambda name: lambda orig: random_rule(name, orig))(fn.__name__)
    rules = {}
    for fn, make in table.items():
        routed = getattr(fn, "routed", None)  # the routed function under ``with_out``...
        if routed is None:
            raise TypeError(f"{fn.__module__}.{fn.__name__} has a vmap rule but is not "
                            "marked _modes.routed, so vmap would never see its calls")
        rules[routed] = make(routed.__wrapped__)
    return rules


FUNCTION_RULES = {}  # routed function -> its rule (filled on first use)


def rule_for(fn):
    """The function-level batching rule of the routed function ``fn``, or None."""
    if not FUNCTION_RULES:
        FUNCTION_RULES.update(_table())
    return FUNCTION_RULES.get(fn)
