"""TorchScript methods for ember's own ``nn`` classes (one template per class).

ember's eager forwards check shapes with f-string errors and choose fast paths in Python,
which TorchScript cannot express; PyTorch likewise writes its library modules' own
TorchScript into every archive. So each class here has its TorchScript source, with the
module's configuration (strides, eps, ...) written in as constants, the way PyTorch inlines
``Final`` attributes. A class without a template has its ``forward`` compiled from its
source, as user code is (a layer whose forward is ``F`` calls needs no template: each
``F`` call is written by its row in ``_script_functional``); a forward that does not
compile raises NotSupportedError naming the class.
"""
import ast

from ember.jit import _types as T

__all__ = ["template_for", "TemplateMethod"]


class TemplateMethod:
    """One TorchScript ``def`` with the signature the frontend checks calls against."""

    def __init__(self, text, is_method=True):
        import textwrap
        self.text = textwrap.dedent(text).strip("\n") + "\n"
        node = ast.parse(self.text).body[0]
        self.name = node.name

        def err(n, msg):
            raise AssertionError(f"template {self.name}: {msg}")
        args = node.args.args[1:] if is_method else node.args.args
        defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
        self.params = []
        for a, d in zip(args, defaults):
            ty = T.type_from_ast(a.annotation, err) if a.annotation is not None else T.TENSOR
            self.params.append((a.arg, ty, None if d is None else ast.unparse(d)))
        self.return_type = T.type_from_ast(node.returns, err)

    def source(self):
        return self.text


def _ints(v):
    return "[" + ", ".join(str(int(x)) for x in v) + "]"


def _f(x):
    return T.literal(float(x))


def _methods(*texts):
    out = {}
    for t in texts:
        m = TemplateMethod(t)
        out[m.name] = m
    return out


def _unary(builtin):
    return lambda m: _methods(f"""
        def forward(self, input: Tensor) -> Tensor:
          return {builtin}
        """)


def _linear(m):
    bias = "self.bias" if m.bias is not None else "None"
    return _methods(f"""
        def forward(self, input: Tensor) -> Tensor:
          return torch.linear(input, self.weight, {bias})
        """)


def _conv(m):
    nd = len(m.kernel_size)
    bias = "self.bias" if m.bias is not None else "None"
    if m.padding_mode != "zeros":
        from ember.jit._frontend import NotSupportedError
        raise NotSupportedError(f"jit.script of {type(m).__name__} with padding_mode="
                                f"{m.padding_mode!r} is not supported yet")
    pad = T.literal(m.padding) if isinstance(m.padding, str) else _ints(m.padding)
    geometry = f"{_ints(m.stride)}, {pad}, {_ints(m.dilation)}, {m.groups}"
    return _methods(f"""
        def forward(self, input: Tensor) -> Tensor:
          return torch.conv{nd}d(input, self.weight, {bias}, {geometry})
        """)


def _batchnorm(m):
    w = "self.weight" if m.weight is not None else "None"
    b = "self.bias" if m.bias is not None else "None"
    if m.running_mean is None:
        stats, use_batch = "None, None", "True"
        pre = ""
    else:
        stats = "self.running_mean, self.running_var"
        use_batch = "self.training"
        pre = ""
    if m.momentum is None:
        from ember.jit._frontend import NotSupportedError
        raise NotSupportedError("jit.script of BatchNorm with momentum=None (cumulative "
                                "average) is not supported yet")
    momentum = m.momentum
    rest = f"{_f(momentum)}, {_f(m.eps)}, True"
    track = m.track_running_stats and m.running_mean is not None
    update = ""
    if track:
        update = """
          if self.training:
            torch.add_(self.num_batches_tracked, 1)
          else:
            pass"""
    return _methods(f"""
        def forward(self, input: Tensor) -> Tensor:{pre}{update}
          return torch.batch_norm(input, {w}, {b}, {stats}, {use_batch}, {rest})
        """)


def _layernorm(m):
    w = "self.weight" if m.weight is not None else "None"
    b = "self.bias" if getattr(m, "bias", None) is not None else "None"
    return _methods(f"""
        def forward(self, input: Tensor) -> Tensor:
          return torch.layer_norm(input, {_ints(m.normalized_shape)}, {w}, {b}, {_f(m.eps)}, True)
        """)


def _dropout(m):
    return _methods(f"""
        def forward(self, input: Tensor) -> Tensor:
          return torch.dropout(input, {_f(m.p)}, self.training)
        """)


def _pool(kind):
    def make(m):
        nd = 2 if "2d" in type(m).__name__ else 1
        k = _ints(_tuple(m.kernel_size, nd))
        s = _ints(_tuple(m.stride if m.stride is not None else m.kernel_size, nd))
        p = _ints(_tuple(m.padding, nd))
        if kind == "max":
            if getattr(m, "return_indices", False):
                from ember.jit._frontend import NotSupportedError
                raise NotSupportedError("jit.script of MaxPool with return_indices=True")
            d = _ints(_tuple(m.dilation, nd))
            call = f"torch.max_pool{nd}d(input, {k}, {s}, {p}, {d}, {m.ceil_mode})"
        else:
            extra = f", {T.literal(m.divisor_override)}" if nd == 2 else ""
            call = (f"torch.avg_pool{nd}d(input, {k}, {s}, {p}, {m.ceil_mode}, "
                    f"{m.count_include_pad}{extra})")
        return _methods(f"""
            def forward(self, input: Tensor) -> Tensor:
              return {call}
            """)
    return make


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _adaptive_avg(m):
    nd = 2 if "2d" in type(m).__name__ else 1
    size = _tuple(m.output_size, nd)
    if any(s is None for s in size):
        from ember.jit._frontend import NotSupportedError
        raise NotSupportedError("jit.script of AdaptiveAvgPool with a None output size")
    return _methods(f"""
        def forward(self, input: Tensor) -> Tensor:
          return torch.adaptive_avg_pool{nd}d(input, {_ints(size)})
        """)


def _sequential(m):
    lines = ["def forward(self, input: Tensor) -> Tensor:"]
    cur = "input"
    for i, name in enumerate(m._modules):
        nxt = f"input{i}"
        lines.append(f'  {nxt} = getattr(self, "{name}").forward({cur})')
        cur = nxt
    lines.append(f"  return {cur}")
    return _methods("\n".join(lines) + "\n")


def _embedding(m):
    pad = -1 if m.padding_idx is None else m.padding_idx
    if m.max_norm is not None:
        from ember.jit._frontend import NotSupportedError
        raise NotSupportedError("jit.script of Embedding with max_norm")
    return _methods(f"""
        def forward(self, input: Tensor) -> Tensor:
          return torch.embedding(self.weight, input, {pad}, {m.scale_grad_by_freq}, {m.sparse})
        """)


def _softmax(name):
    def make(m):
        if m.dim is None:
            from ember.jit._frontend import NotSupportedError
            raise NotSupportedError(f"jit.script of {type(m).__name__} with dim=None")
        return _methods(f"""
            def forward(self, input: Tensor) -> Tensor:
              return torch.{name}(input, {m.dim})
            """)
    return make


def _gelu(m):
    if m.approximate == "none":
        return _unary("torch.gelu(input)")(m)
    # gelu's approximate= needs archive operator version 10, which jit-load does not
    # write yet, so the tanh form is spelled out
    return _methods("""
        def forward(self, input: Tensor) -> Tensor:
          inner = torch.mul(torch.add(input, torch.mul(torch.pow(input, 3), 0.044715)),
                            0.7978845608028654)
          return torch.mul(torch.mul(input, 0.5), torch.add(torch.tanh(inner), 1.))
        """)


def _nothing(m):
    return {}


def upsample_call(fc_error, x, size, scale, mode, align):
    """``torch.upsample_nearest2d`` / ``upsample_bilinear2d`` for F.interpolate and
    Upsample (4-D input: the aten op rejects other ranks loudly)."""
    if mode not in ("nearest", "bilinear"):
        fc_error(f"interpolate mode {mode!r} is not supported in scripted code yet "
                 "(nearest, bilinear)")
    if mode == "nearest":
        return f"torch.upsample_nearest2d({x}, {size}, {scale})"
    return f"torch.upsample_bilinear2d({x}, {size}, {align}, {scale})"


def _upsample(m):
    from ember.jit._frontend import NotSupportedError

    def err(msg):
        raise NotSupportedError(msg)
    size = "None" if m.size is None else _ints(_tuple(m.size, 2))
    scale = "None" if m.scale_factor is None else (
        "[" + ", ".join(_f(v) for v in _tuple(m.scale_factor, 2)) + "]")
    if m.recompute_scale_factor:
        err("jit.script of Upsample with recompute_scale_factor=True")
    call = upsample_call(err, "input", size, scale, m.mode, bool(m.align_corners))
    return _unary(call)(m)


def _conv_transpose(m):
    nd = len(m.kernel_size)
    bias = "self.bias" if m.bias is not None else "None"
    if m.padding_mode != "zeros":
        from ember.jit._frontend import NotSupportedError
        raise NotSupportedError(f"jit.script of {type(m).__name__} with padding_mode="
                                f"{m.padding_mode!r} is not supported")
    geometry = (f"{_ints(m.stride)}, {_ints(m.padding)}, {_ints(m.output_padding)}, "
                f"{m.groups}, {_ints(m.dilation)}")
    return _methods(f"""
        def forward(self, input: Tensor, output_size: Optional[List[int]]=None) -> Tensor:
          if torch.__isnot__(output_size, None):
            ops.prim.RaiseException("output_size is not supported in scripted code",
                                    "builtins.NotImplementedError")
          else:
            pass
          return torch.conv_transpose{nd}d(input, self.weight, {bias}, {geometry})
        """)


def _group_norm(m):
    w = "self.weight" if m.weight is not None else "None"
    b = "self.bias" if m.bias is not None else "None"
    return _unary(f"torch.group_norm(input, {m.num_groups}, {w}, {b}, {_f(m.eps)}, True)")(m)


def _const_pad(m):
    value = _f(m.value) if not isinstance(m.value, int) else str(m.value)
    return _unary(f"torch.constant_pad_nd(input, {_ints(m.padding)}, {value})")(m)


def template_for(module, library_cls):
    """The TorchScript methods of an ember ``nn`` module (by its library class), or None
    when it has no template (its forward is then compiled from its source)."""
    from ember.jit._script_attention_templates import ATTENTION_TEMPLATES
    from ember.jit._script_rnn_templates import RNN_TEMPLATES
    make = None
    for klass in type(module).__mro__:
        make = (_TEMPLATES.get(klass.__name__) or RNN_TEMPLATES.get(klass.__name__)
                or ATTENTION_TEMPLATES.get(klass.__name__))
        if make is not None or klass is library_cls:
            break
    return None if make is None else make(module)


_TEMPLATES = {
    "Linear": _linear, "Conv1d": _conv, "Conv2d": _conv,
    "BatchNorm1d": _batchnorm, "BatchNorm2d": _batchnorm, "LayerNorm": _layernorm,
    "Dropout": _dropout, "Dropout1d": _dropout, "Dropout2d": _dropout,
    "MaxPool1d": _pool("max"), "MaxPool2d": _pool("max"), "AvgPool1d": _pool("avg"),
    "AvgPool2d": _pool("avg"), "AdaptiveAvgPool1d": _adaptive_avg,
    "AdaptiveAvgPool2d": _adaptive_avg, "Sequential": _sequential,
    "ModuleList": _nothing, "ModuleDict": _nothing, "Embedding": _embedding,
    "GELU": _gelu, "Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"),
    "Softsign": _unary("torch.div(input, torch.add(torch.abs(input), 1))"),
    "PReLU": _unary("torch.prelu(input, self.weight)"),
    "GroupNorm": _group_norm, "ConvTranspose1d": _conv_transpose,
    "ConvTranspose2d": _conv_transpose, "ConstantPad1d": _const_pad,
    "ConstantPad2d": _const_pad, "ZeroPad1d": _const_pad, "ZeroPad2d": _const_pad,
    "Upsample": _upsample,
}
# Layers whose forward is F calls (ReLU, Tanh, ELU, Softplus, Flatten, Identity...) have no
# template: their forward compiles from its source, each F call written by its row in
# _script_functional.
