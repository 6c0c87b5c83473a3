"""TorchScript templates for ``MultiheadAttention``, ``TransformerEncoderLayer`` and
``TransformerEncoder`` (aten builtins only: ``torch.linear``, ``torch.bmm``,
``torch.softmax``...), so the saved code runs in libtorch as it runs in ember.

Masks follow the composite (non-fused) path: a bool mask is True where attention is not
allowed, a float mask is added to the scores. The encoder reproduces what PyTorch's
nested-tensor path gives in inference (eval mode, no gradient needed, a left-aligned
padding mask, no attention mask): padded positions of the output are 0 before ``norm``.
"""
from ember.jit import _types as T

__all__ = ["ATTENTION_TEMPLATES"]


def _methods(*texts):
    from ember.jit._script_templates import TemplateMethod
    out = {}
    for t in texts:
        m = TemplateMethod(t)
        out[m.name] = m
    return out


def _unsupported(what):
    from ember.jit._frontend import NotSupportedError
    raise NotSupportedError(f"jit.script of {what} is not supported yet")


def _float_mask(m, out, like, indent):
    """A bool mask (True = not allowed) as an additive float one; float masks as given."""
    pad = "\n" + "  " * indent
    return (f"{pad}if torch.eq(ops.prim.dtype({m}), 11):"
            f"{pad}  {out} = torch.masked_fill(torch.zeros_like({m}, "
            f"dtype=ops.prim.dtype({like})), {m}, -inf)"
            f"{pad}else:{pad}  {out} = {m}")


def _mha(m):
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        _unsupported("MultiheadAttention with kdim/vdim, add_bias_kv or add_zero_attn")
    h, e = m.num_heads, m.embed_dim
    dh = e // h
    scale = T.literal(float(dh) ** -0.5)
    bias = m.in_proj_bias is not None
    bq = "bs[0]" if bias else "None"
    bk = "bs[1]" if bias else "None"
    bv = "bs[2]" if bias else "None"
    bsplit = "  bs = torch.chunk(self.in_proj_bias, 3, 0)\n" if bias else ""
    out_b = "self.out_proj.bias" if m.out_proj.bias is not None else "None"
    bf = m.batch_first
    to_seq = ("torch.transpose({0}, 1, 0)" if bf else "{0}")
    p = T.literal(float(m.dropout))
    return _methods(f"""
def forward(self, query: Tensor, key: Tensor, value: Tensor,
    key_padding_mask: Optional[Tensor]=None, need_weights: bool=True,
    attn_mask: Optional[Tensor]=None, average_attn_weights: bool=True,
    is_causal: bool=False) -> Tuple[Tensor, Optional[Tensor]]:
  is_batched = torch.eq(torch.dim(query), 3)
  if is_batched:
    q_in = {to_seq.format("query")}
    k_in = {to_seq.format("key")}
    v_in = {to_seq.format("value")}
  else:
    q_in = torch.unsqueeze(query, 1)
    k_in = torch.unsqueeze(key, 1)
    v_in = torch.unsqueeze(value, 1)
  tgt_len = torch.size(q_in, 0)
  bsz = torch.size(q_in, 1)
  src_len = torch.size(k_in, 0)
  ws = torch.chunk(self.in_proj_weight, 3, 0)
{bsplit}  q = torch.linear(q_in, ws[0], {bq})
  k = torch.linear(k_in, ws[1], {bk})
  v = torch.linear(v_in, ws[2], {bv})
  q = torch.transpose(torch.view(q, [tgt_len, torch.mul(bsz, {h}), {dh}]), 0, 1)
  k = torch.transpose(torch.view(k, [src_len, torch.mul(bsz, {h}), {dh}]), 0, 1)
  v = torch.transpose(torch.view(v, [src_len, torch.mul(bsz, {h}), {dh}]), 0, 1)
  scores = torch.bmm(torch.mul(q, {scale}), torch.transpose(k, 1, 2))
  if torch.__isnot__(attn_mask, None):
    am0 = unchecked_cast(Tensor, attn_mask){_float_mask("am0", "am", "q", 2)}
    if torch.eq(torch.dim(am), 2):
      scores = torch.add(scores, torch.unsqueeze(am, 0))
    else:
      scores = torch.add(scores, am)
  else:
    pass
  if torch.__isnot__(key_padding_mask, None):
    kp0 = unchecked_cast(Tensor, key_padding_mask)
    if is_batched:
      kp1 = kp0
    else:
      kp1 = torch.unsqueeze(kp0, 0){_float_mask("kp1", "kp", "q", 2)}
    s4 = torch.view(scores, [bsz, {h}, tgt_len, src_len])
    s4 = torch.add(s4, torch.view(kp, [bsz, 1, 1, src_len]))
    scores = torch.view(s4, [torch.mul(bsz, {h}), tgt_len, src_len])
  else:
    pass
  attn = torch.softmax(scores, -1)
  attn = torch.dropout(attn, {p}, self.training)
  out = torch.bmm(attn, v)
  out = torch.view(torch.contiguous(torch.transpose(out, 0, 1)), [torch.mul(tgt_len, bsz), {e}])
  out = torch.view(torch.linear(out, self.out_proj.weight, {out_b}), [tgt_len, bsz, {e}])
  weights = annotate(Optional[Tensor], None)
  if need_weights:
    w4 = torch.view(attn, [bsz, {h}, tgt_len, src_len])
    if average_attn_weights:
      w4 = torch.mean(w4, [1])
    else:
      pass
    if is_batched:
      weights = w4
    else:
      weights = torch.squeeze(w4, 0)
  else:
    pass
  if is_batched:
    result = {to_seq.format("out")}
  else:
    result = torch.squeeze(out, 1)
  return (result, weights)
""")


def _activation(m):
    kind = getattr(m, "activation_relu_or_gelu", 0)
    if kind == 1:
        return "torch.relu({})"
    if kind == 2:
        return "torch.gelu({})"
    _unsupported("TransformerEncoderLayer with an activation other than relu/gelu")


def _encoder_layer(m):
    act = _activation(m).format("self.linear1.forward(x)")
    if m.norm_first:
        body = """
  x = torch.add(x, self._sa_block(self.norm1.forward(x), src_mask, src_key_padding_mask))
  x = torch.add(x, self._ff_block(self.norm2.forward(x)))"""
    else:
        body = """
  x = self.norm1.forward(torch.add(x, self._sa_block(x, src_mask, src_key_padding_mask)))
  x = self.norm2.forward(torch.add(x, self._ff_block(x)))"""
    return _methods(f"""
def forward(self, src: Tensor, src_mask: Optional[Tensor]=None,
    src_key_padding_mask: Optional[Tensor]=None, is_causal: bool=False) -> Tensor:
  x = src{body}
  return x
""", """
def _sa_block(self, x: Tensor, attn_mask: Optional[Tensor],
    key_padding_mask: Optional[Tensor]) -> Tensor:
  y = (self.self_attn.forward(x, x, x, key_padding_mask, False, attn_mask))[0]
  return self.dropout1.forward(y)
""", f"""
def _ff_block(self, x: Tensor) -> Tensor:
  h = self.dropout.forward({act})
  return self.dropout2.forward(self.linear2.forward(h))
""")


def _encoder(m):
    from ember.nn.modules.attention import _fastpath_enabled
    layers = list(m.layers._modules)
    first = m.layers[0]
    calls = "\n".join(
        f'  output = getattr(self.layers, "{n}").forward(output, mask, kpm, False)'
        for n in layers)
    norm = "  output = self.norm.forward(output)\n" if m.norm is not None else ""
    nested = ""
    if _fastpath_enabled() and getattr(m, "use_nested_tensor", False):
        sa = "getattr(self.layers, \"0\").self_attn"
        lay = "getattr(self.layers, \"0\")"
        tensors = ["src"] + [f"{sa}.{n}" for n in ("in_proj_weight", "in_proj_bias")] + [
            f"{sa}.out_proj.{n}" for n in ("weight", "bias")] + [
            f"{lay}.{mod}.{n}" for mod in ("norm1", "norm2", "linear1", "linear2")
            for n in ("weight", "bias")]
        if first.self_attn.in_proj_bias is None:
            _unsupported("TransformerEncoder over layers without biases")
        grad = "\n".join(f"      if ops.prim.requires_grad({t}):\n        needs_grad = True"
                         f"\n      else:\n        pass" for t in tensors)
        aligned = ""
        if getattr(m, "mask_check", True):
            aligned = """
    if torch.gt(torch.size(padding, 1), 1):
      pi = torch.to(padding, 3)
      aligned = bool(torch.all(torch.ge(torch.slice(pi, 1, 1), torch.slice(pi, 1, 0, -1))))
    else:
      pass"""
        nested = f"""
  use_nested = False
  if has_padding:
    aligned = True{aligned}
    needs_grad = False
    if torch.is_grad_enabled():
{grad}
    else:
      pass
    if torch.__not__({lay}.training):
      if torch.eq(torch.dim(src), 3):
        if torch.__is__(mask, None):
          if aligned:
            use_nested = torch.__not__(needs_grad)
          else:
            pass
        else:
          pass
      else:
        pass
    else:
      pass
  else:
    pass"""
        where = """
  if use_nested:
    output = torch.where(torch.unsqueeze(padding, -1), 0., output)
  else:
    pass
"""
    else:
        where = "\n"
    return _methods(f"""
def forward(self, src: Tensor, mask: Optional[Tensor]=None,
    src_key_padding_mask: Optional[Tensor]=None, is_causal: Optional[bool]=None) -> Tensor:
  kpm = annotate(Optional[Tensor], None)
  padding = torch.zeros([1, 1], dtype=11)
  has_padding = False
  if torch.__isnot__(src_key_padding_mask, None):
    kp0 = unchecked_cast(Tensor, src_key_padding_mask){_float_mask("kp0", "kpf", "src", 2)}
    kpm = kpf
    padding = torch.ne(kpf, 0)
    has_padding = True
  else:
    pass{nested}
  output = src
{calls}{where}{norm}  return output
""")


ATTENTION_TEMPLATES = {"MultiheadAttention": _mha, "TransformerEncoderLayer": _encoder_layer,
                       "TransformerEncoder": _encoder}
