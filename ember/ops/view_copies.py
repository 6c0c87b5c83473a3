"""Views as new tensors: PyTorch's ``*_copy`` functions (``diagonal_copy``,
``slice_copy``, ``view_copy`` ...) and ``unsafe_chunk``/``unsafe_split``, each the view
op followed by a clone (so gradients are the view's)."""
from ember.ops._util import wrap_dim

__all__ = ["alias_copy", "as_strided_copy", "diagonal_copy", "expand_copy", "permute_copy",
           "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold_copy",
           "unsqueeze_copy", "view_copy", "split_with_sizes_copy", "unsafe_chunk", "unsafe_split",
           "slice_copy", "select_copy", "split_copy", "detach_copy", "view_as_real_copy",
           "view_as_complex_copy"]


def _copy_variant(view_name, doc_name=None):
    def fn(*args, out=None, **kwargs):
        from ember import _core  # the op namespace, complete once ember is imported
        if view_name == "alias":
            res = args[0]
        elif hasattr(_core, view_name):
            res = getattr(_core, view_name)(*args, **kwargs)
        else:  # a view that PyTorch has only as a method (expand, view, unfold ...)
            res = getattr(args[0], view_name)(*args[1:], **kwargs)
        res = tuple(r.clone() for r in res) if isinstance(res, (tuple, list)) else res.clone()
        if out is not None:
            from ember.ops._util import write_out
            if isinstance(res, tuple):  # one out tensor per piece
                if len(out) != len(res):
                    raise RuntimeError(f"{fn.__name__}: expected {len(res)} out tensors, "
                                       f"got {len(out)}")
                return [write_out(r, o) for r, o in zip(res, out)]
            return write_out(res, out)
        return res
    fn.__name__ = doc_name or view_name + "_copy"
    fn.__doc__ = f"``{view_name}`` as a new tensor (PyTorch's ``{fn.__name__}``), not a view."
    return fn


alias_copy = _copy_variant("alias")
as_strided_copy = _copy_variant("as_strided")
diagonal_copy = _copy_variant("diagonal")
expand_copy = _copy_variant("expand")
permute_copy = _copy_variant("permute")
squeeze_copy = _copy_variant("squeeze")
t_copy = _copy_variant("t")
transpose_copy = _copy_variant("transpose")
unbind_copy = _copy_variant("unbind")
unfold_copy = _copy_variant("unfold")
unsqueeze_copy = _copy_variant("unsqueeze")
view_copy = _copy_variant("view")
split_with_sizes_copy = _copy_variant("split", "split_with_sizes_copy")
unsafe_chunk = _copy_variant("chunk", "unsafe_chunk")
unsafe_split = _copy_variant("split", "unsafe_split")


def slice_copy(input, dim=0, start=None, end=None, step=1):
    """``input[..., start:end:step, ...]`` along ``dim`` as a new tensor (ATen's ``slice``
    as a copy)."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = wrap_dim(dim, max(input.dim(), 1))
    return input[(slice(None),) * d + (slice(start, end, step),)].clone()


select_copy = _copy_variant("select")
split_copy = _copy_variant("split")
detach_copy = _copy_variant("detach")
view_as_real_copy = _copy_variant("view_as_real")
view_as_complex_copy = _copy_variant("view_as_complex")
