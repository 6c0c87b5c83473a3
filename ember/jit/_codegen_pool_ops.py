"""TorchScript spellings of the pooling family, transposed convolution, instance norm
and ``tensordot``: the aten call PyTorch's tracer records, with the layer's arguments, so
a saved trace computes its windows (and output sizes, and tensordot's broadcast of a
size-1 contracted dim) from the input at run time."""
from ember.jit._codegen_emitter import emits, literal
from ember.ops import adaptive_pooling, conv, pooling


def _ints(xs):
    return literal(tuple(int(v) for v in xs))


@emits(pooling.MaxPool)
def _max_pool(em, node, x, g):
    if len(node.outputs) > 1:
        raise NotImplementedError("jit codegen: max pooling with return_indices=True")
    nd = g.nd
    if nd not in (1, 2, 3):
        raise NotImplementedError(f"jit codegen: {nd}-d max pooling")
    # the layer's own ceil_mode (not whether the example's size rounded up: a size where
    # both agree would save floor mode, and other sizes would lose their last window)
    return (f"torch.max_pool{nd}d({em.e(x)}, {literal(tuple(g.K))}, {literal(tuple(g.s))}, "
            f"{literal(tuple(g.lo))}, {literal(tuple(g.d))}, {literal(bool(g.ceil))})")


@emits("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d")
def _adaptive_avg(em, node, x, output_size):
    nd = int(node.op[-2])
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else \
        [output_size] * nd
    rank = len(node.inputs[0].shape)
    parts = [f"{em.e(x)}.size({rank - nd + i})" if o is None else em.e(o)
             for i, o in enumerate(sizes)]
    return f"torch.{node.op}({em.e(x)}, [{', '.join(parts)}])"


@emits(pooling.AvgPool, pooling.AvgPool3D)
def _avg_pool(em, node, x, g, div):
    """``aten::avg_pool2d/3d``; a 1-d pooling runs as 2-d with a height of 1 in ember's
    graph (the unsqueeze and squeeze around it are nodes of their own)."""
    count_include_pad, divisor_override = g.extra
    return (f"torch.avg_pool{g.nd}d({em.e(x)}, {_ints(g.K)}, {_ints(g.s)}, {_ints(g.lo)}, "
            f"{literal(bool(g.ceil))}, {literal(bool(count_include_pad))}, "
            f"{literal(divisor_override)})")


@emits(conv.ConvInput)
def _conv_transpose(em, node, y, w, b, g):
    """``aten::conv_transpose{1,2,3}d``: padding from the forward convolution's, and the
    output padding that gives the recorded output size."""
    nd = g.nd
    O, S = node.inputs[0].shape[-nd:], node.outputs[0].shape[-nd:]
    lo, hi = tuple(int(v) for v in g.lo), tuple(int(v) for v in g.hi)
    extra = [int(s_) - ((int(o) - 1) * int(st) - 2 * p + int(d) * (int(k) - 1) + 1)
             for s_, o, st, p, d, k in zip(S, O, g.s, lo, g.d, g.K)]
    if lo != hi or any(not 0 <= e < max(int(st), int(d)) for e, st, d in
                       zip(extra, g.s, g.d)):
        raise NotImplementedError("jit codegen: a transposed convolution whose padding is "
                                  "not one number per side")
    return (f"torch.conv_transpose{nd}d({em.e(y)}, {em.e(w)}, {em.e(b)}, {_ints(g.s)}, "
            f"{_ints(lo)}, {_ints(extra)}, {int(g.G)}, {_ints(g.d)})")


@emits(adaptive_pooling.AdaptiveMaxPool, adaptive_pooling.AdaptiveMaxPool3D)
def _adaptive_max_pool(em, node, x, O):
    """``aten::adaptive_max_pool2d/3d`` (values, indices); 1-d runs as 2-d in the graph."""
    nd = 3 if node.target is adaptive_pooling.AdaptiveMaxPool3D else 2
    res = em.tmp(f"torch.adaptive_max_pool{nd}d({em.e(x)}, {em.ints(O)})")  # sizes may be traced
    return [f"{res}[0]", f"{res}[1]"]


@emits(adaptive_pooling.FractionalMaxPool, adaptive_pooling.FractionalMaxPool3D)
def _fractional_max_pool(em, node, x, samples, kernel_size, output_size):
    """``aten::fractional_max_pool2d/3d(self, kernel_size, output_size, random_samples)``
    (values, indices)."""
    nd = len(kernel_size)
    res = em.tmp(f"torch.fractional_max_pool{nd}d({em.e(x)}, {_ints(kernel_size)}, "
                 f"{em.ints(output_size)}, {em.e(samples)})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("instance_norm")
def _instance_norm(em, node, input, running_mean=None, running_var=None, weight=None,
                   bias=None, use_input_stats=True, momentum=0.1, eps=1e-05):
    """Instance norm, recorded as one call: PyTorch's traced spelling (aten's order)."""
    return (f"torch.instance_norm({em.e(input)}, {em.e(weight)}, {em.e(bias)}, "
            f"{em.e(running_mean)}, {em.e(running_var)}, {literal(bool(use_input_stats))}, "
            f"{literal(float(momentum if momentum is not None else 0.0))}, "
            f"{literal(float(eps))}, True)")


@emits("tensordot")
def _tensordot(em, node, a, b, dims=2, out=None):
    """``aten::tensordot`` takes the two lists of contracted dims: an int ``dims`` is the
    last ``dims`` of ``a`` with the first of ``b``."""
    if isinstance(dims, int):
        na = len(node.inputs[0].shape)
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    return f"torch.tensordot({em.e(a)}, {em.e(b)}, {em.ints(da)}, {em.ints(db)})"
