"""Views as new tensors: PyTorch's ``*_copy`` functions (``diagonal_copy``,
``slice_copy``, ``view_copy`` ...) and ``unsafe_chunk``/``unsafe_split``, each the view
op followed by a clone (so gradients are the view's)."""
from ember.ops._util import follows_int_reads, wrap_dim

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
        elif view_name == "view":  # a copy: any layout will do (torch's reshapes)
            res = args[0].contiguous().view(*args[1:], **kwargs)
        else:  # a view that PyTorch has only as a method (expand, unfold ...)
            res = getattr(args[0], view_name)(*args[1:], **kwargs)
        res = tuple(r.clone() for r in res) if isinstance(res, (tuple, list)) else res.clone()
        if out is not None:
            from ember.ops._util import write_out
            if isinstance(res, tuple):  # one out tensor per piece
                if len(out) != len(res):
                    raise RuntimeError(f"{fn.__name__}: expected {len(res)} out tensors, "
                                       f"got {len(out)}")
                # (the pieces' out= must not share memory with the input in part)
                return [write_out(r, o, None, args[:1]) for r, o in zip(res, out)]
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
_chunk_copy = _copy_variant("chunk", "unsafe_chunk")
_split_copy = _copy_variant("split", "unsafe_split")


@follows_int_reads
def unsafe_chunk(input, chunks, dim=0):
    """``chunk`` whose pieces are not tracked as views: one ``UnsafeSplitBackward0``
    node, as PyTorch records it."""
    from ember.ops.join import unsafe_pieces
    if chunks <= 0 or input.dim() == 0 or input.shape[wrap_dim(dim, input.dim())] == 0:
        return _chunk_copy(input, chunks, dim)  # chunk's own errors and empty pieces
    return unsafe_pieces(input, chunks, wrap_dim(dim, input.dim()))


def unsafe_split(input, split_size, dim=0):
    """``split`` into pieces of ``split_size`` not tracked as views (one
    ``UnsafeSplitBackward0`` node)."""
    from ember.ops.join import UnsafeSplit
    if not isinstance(split_size, int) or split_size <= 0 or input.dim() == 0:
        return _split_copy(input, split_size, dim)
    d = wrap_dim(dim, input.dim())
    n = input.shape[d]
    if n == 0:
        return _split_copy(input, split_size, dim)
    out = UnsafeSplit.apply(input, split_size, d)  # (the node cuts it at each length)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


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
