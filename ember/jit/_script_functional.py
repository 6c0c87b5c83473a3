"""``F.*`` calls in scripted code -> TorchScript builtins (``aten`` spellings).

A call is bound to ember's own ``F`` function signature (which is PyTorch's), then
written in the builtin's argument order: ``F.batch_norm(x, rm, rv, w, b, training, m, eps)``
becomes ``torch.batch_norm(x, w, b, rm, rv, training, m, eps, True)``. ``F`` functions not in
this table raise NotSupportedError naming them, rather than guessing an argument order.
"""
import inspect

from ember.jit import _types as T
from ember.jit._frontend_expr import Val

# name -> (builtin, argument spec, result type); a spec entry is a parameter name, a
# parameter name with ":N" (an int widened to an N-list, as the n-d builtins take),
# "=code" (a literal) or "kw:name" (passed by keyword)
_TABLE = {
    "relu": ("torch.relu", ["input"]),
    "relu_": ("torch.relu_", ["input"]),
    "relu6": ("torch.hardtanh", ["input", "=0.", "=6."]),
    "leaky_relu": ("torch.leaky_relu", ["input", "negative_slope"]),
    "elu": ("torch.elu", ["input", "alpha"]),
    "selu": ("torch.selu", ["input"]),
    "celu": ("torch.celu", ["input", "alpha"]),
    "gelu": ("torch.gelu", ["input", "kw:approximate"]),
    "silu": ("torch.silu", ["input"]),
    "mish": ("torch.mish", ["input"]),
    "sigmoid": ("torch.sigmoid", ["input"]),
    "tanh": ("torch.tanh", ["input"]),
    "hardtanh": ("torch.hardtanh", ["input", "min_val", "max_val"]),
    "hardsigmoid": ("torch.hardsigmoid", ["input"]),
    "hardswish": ("torch.hardswish", ["input"]),
    "softplus": ("torch.softplus", ["input", "beta", "threshold"]),
    "logsigmoid": ("torch.log_sigmoid", ["input"]),
    "softmax": ("torch.softmax", ["input", "dim", "dtype"]),
    "log_softmax": ("torch.log_softmax", ["input", "dim", "dtype"]),
    "dropout": ("torch.dropout", ["input", "p", "training"]),
    "linear": ("torch.linear", ["input", "weight", "bias"]),
    "conv1d": ("torch.conv1d", ["input", "weight", "bias", "stride:1", "padding:1",
                                "dilation:1", "groups"]),
    "conv2d": ("torch.conv2d", ["input", "weight", "bias", "stride:2", "padding:2",
                                "dilation:2", "groups"]),
    "max_pool1d": ("torch.max_pool1d", ["input", "kernel_size:1", "stride:1", "padding:1",
                                        "dilation:1", "ceil_mode"]),
    "max_pool2d": ("torch.max_pool2d", ["input", "kernel_size:2", "stride:2", "padding:2",
                                        "dilation:2", "ceil_mode"]),
    "avg_pool1d": ("torch.avg_pool1d", ["input", "kernel_size:1", "stride:1", "padding:1",
                                        "ceil_mode", "count_include_pad"]),
    "avg_pool2d": ("torch.avg_pool2d", ["input", "kernel_size:2", "stride:2", "padding:2",
                                        "ceil_mode", "count_include_pad",
                                        "divisor_override"]),
    "adaptive_avg_pool1d": ("torch.adaptive_avg_pool1d", ["input", "output_size:1"]),
    "adaptive_avg_pool2d": ("torch.adaptive_avg_pool2d", ["input", "output_size:2"]),
    "batch_norm": ("torch.batch_norm", ["input", "weight", "bias", "running_mean",
                                        "running_var", "training", "momentum", "eps",
                                        "=True"]),
    "layer_norm": ("torch.layer_norm", ["input", "normalized_shape:1", "weight", "bias",
                                        "eps", "=True"]),
    "group_norm": ("torch.group_norm", ["input", "num_groups", "weight", "bias", "eps",
                                        "=True"]),
    "embedding": ("torch.embedding", ["weight", "input", "padding_idx", "scale_grad_by_freq",
                                      "sparse"]),
    "pad": ("torch.pad", ["input", "pad", "mode", "value"]),
    "scaled_dot_product_attention": (
        "torch.scaled_dot_product_attention",
        ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "kw:scale"]),
    "mse_loss": ("torch.mse_loss", ["input", "target", "reduction"]),
    "l1_loss": ("torch.l1_loss", ["input", "target", "reduction"]),
    "cosine_similarity": ("torch.cosine_similarity", ["x1", "x2", "dim", "eps"]),
    "pairwise_distance": ("torch.pairwise_distance", ["x1", "x2", "p", "eps", "keepdim"]),
    "one_hot": ("torch.one_hot", ["tensor", "num_classes"]),
    "softshrink": ("torch.softshrink", ["input", "lambd"]),
    "glu": ("torch.glu", ["input", "dim"]),
    "threshold": ("torch.threshold", ["input", "threshold", "value"]),
    "pixel_shuffle": ("torch.pixel_shuffle", ["input", "upscale_factor"]),
    "hardshrink": ("torch.hardshrink", ["input", "lambd"]),
    "channel_shuffle": ("torch.channel_shuffle", ["input", "groups"]),
    "pixel_unshuffle": ("torch.pixel_unshuffle", ["input", "downscale_factor"]),
    "alpha_dropout": ("torch.alpha_dropout", ["input", "p", "training"]),
    "normalize": None,
}

_REDUCTIONS = {"mean": 1, "sum": 2, "none": 0}


def _gelu(input, approximate="none"):
    """PyTorch's signature of F.gelu (ember's wraps it in *args)."""


def _logsigmoid(input):
    """PyTorch's signature of F.logsigmoid."""


_SIGNATURES = {"gelu": _gelu, "logsigmoid": _logsigmoid}


def functional_call(fc, node, name, fn):
    from ember.jit._frontend import NotSupportedError
    from ember.jit._script_calls import _args
    if name == "interpolate":
        return _interpolate(fc, node, fn)
    spec = _TABLE.get(name)
    if spec is None:
        fc.error(node, f"F.{name} is not supported in scripted code yet", NotSupportedError)
    builtin, order = spec
    args, kwargs = _args(fc, node)
    sig = inspect.signature(_SIGNATURES.get(name, fn))
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        fc.error(node, f"F.{name}: {e}")
    given = dict(bound.arguments)
    params = sig.parameters
    pos, kws = [], []
    for entry in order:
        if entry.startswith("="):
            pos.append(entry[1:])
            continue
        is_kw = entry.startswith("kw:")
        pname = entry[3:] if is_kw else entry
        width = None
        if ":" in pname:
            pname, width = pname.split(":")
            width = int(width)
        if pname in given:
            v = given[pname]
            code = v.code
            if width is not None and v.ty == T.INT:
                code = "[" + ", ".join([code] * width) + "]"
            elif width is not None and v.ty.kind == "Tuple":
                code = "[" + ", ".join(f"({v.code})[{i}]" for i in range(len(v.ty.args))) + "]"
            if pname == "reduction" and code.strip('"') in _REDUCTIONS:
                code = str(_REDUCTIONS[code.strip('"')])
        else:
            if pname not in params:
                fc.error(node, f"F.{name}: no parameter '{pname}' in ember's signature",
                         NotSupportedError)
            d = params[pname].default
            if d is inspect.Parameter.empty:
                fc.error(node, f"F.{name} is missing argument '{pname}'")
            if pname == "stride" and d is None:
                code = "annotate(List[int], [])"
            elif pname == "padding_idx" and d is None:
                code = "-1"
            elif pname == "reduction":
                code = str(_REDUCTIONS.get(d, 1))
            elif width is not None and isinstance(d, int):
                code = "[" + ", ".join([str(d)] * width) + "]"
            else:
                code = T.literal(d)
            if is_kw:
                continue
        if is_kw:
            kws.append(f"{pname}={code}")
        else:
            pos.append(code)
    if name == "gelu" and "approximate" in given and given["approximate"].code != '"none"':
        if given["approximate"].code != '"tanh"':
            fc.error(node, "F.gelu: approximate must be a constant 'none' or 'tanh'")
        # approximate= needs archive operator version 10 (not written yet): spelled out
        x = fc.emit_tmp(given["input"].code)
        inner = f"torch.mul(torch.add({x}, torch.mul(torch.pow({x}, 3), 0.044715)), " \
                "0.7978845608028654)"
        return Val(f"torch.mul(torch.mul({x}, 0.5), torch.add(torch.tanh({inner}), 1.))",
                   T.TENSOR)
    if name in ("relu", "relu_") and given.get("inplace") is not None and \
            given["inplace"].code == "True":
        builtin = "torch.relu_"
    if name == "dropout" and given.get("inplace") is not None and \
            given["inplace"].code == "True":
        builtin = "torch.dropout_"
    return Val(f"{builtin}({', '.join(pos + kws)})", T.TENSOR)


def _interpolate(fc, node, fn):
    from ember.jit._frontend import NotSupportedError
    from ember.jit._script_calls import _args
    from ember.jit._script_templates import upsample_call
    args, kwargs = _args(fc, node)
    try:
        given = inspect.signature(fn).bind(*args, **kwargs).arguments
    except TypeError as e:
        fc.error(node, f"F.interpolate: {e}")

    def const(name, default):
        v = given.get(name)
        if v is None:
            return default
        try:
            return ast_literal(v.code)
        except ValueError:
            fc.error(node, f"F.interpolate: {name} must be a constant in scripted code")

    def err(msg):
        fc.error(node, msg, NotSupportedError)
    if const("recompute_scale_factor", None) or const("antialias", False):
        err("F.interpolate with recompute_scale_factor or antialias in scripted code")
    mode, align = const("mode", "nearest"), bool(const("align_corners", None))
    size = given.get("size")
    scale = given.get("scale_factor")
    size_code = "None"
    if size is not None:
        size_code = f"[{size.code}, {size.code}]" if size.ty == T.INT else size.code
    scale_code = "None"
    if scale is not None:
        if scale.ty.kind in ("float", "int"):
            scale_code = f"[float({scale.code}), float({scale.code})]"
        else:
            scale_code = scale.code
    x = given["input"].code
    return Val(upsample_call(err, x, size_code, scale_code, mode, align), T.TENSOR)


def ast_literal(code):
    import ast
    return ast.literal_eval(code)
