"""``torch.nn.attention.flex_attention``: attention with a user's score and mask
functions.

``score_mod(score, b, h, q_idx, kv_idx)`` rewrites each attention score and
``mask_mod(b, h, q_idx, kv_idx)`` says which ones are kept. PyTorch compiles them into a
block-sparse kernel; ember calls each once on the whole score tensor, with the indices
as broadcasting integer tensors (``b`` of shape ``(B, 1, 1, 1)``, ``h`` ``(1, H, 1, 1)``,
``q_idx`` ``(1, 1, Q, 1)``, ``kv_idx`` ``(1, 1, 1, KV)``), so functions written with
tensor arithmetic, comparisons and ``where`` give PyTorch's values; a function that
branches in Python on a tensor's value raises. A :class:`BlockMask` keeps its mask
function and the dense mask; attention uses the exact element mask.
"""
import math
from dataclasses import dataclass

__all__ = ["BlockMask", "flex_attention", "create_block_mask", "create_mask", "noop_mask",
           "and_masks", "or_masks", "AuxRequest", "AuxOutput"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_NEGATIVE = float("-inf")


def noop_mask(batch, head, token_q, token_kv):
    """Keeps every score."""
    from ember import ones_like
    return ones_like(token_q + token_kv, dtype=_bool())


def _bool():
    from ember import bool as b
    return b


def and_masks(*mask_mods):
    """A mask keeping what every one of ``mask_mods`` keeps."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = noop_mask(b, h, q_idx, kv_idx)
        for m in mask_mods:
            result = result & m(b, h, q_idx, kv_idx)
        return result
    return and_mask


def or_masks(*mask_mods):
    """A mask keeping what any one of ``mask_mods`` keeps."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = ~noop_mask(b, h, q_idx, kv_idx)
        for m in mask_mods:
            result = result | m(b, h, q_idx, kv_idx)
        return result
    return or_mask


def _indices(B, H, Q, KV, device=None):
    from ember import arange
    return (arange(B, device=device).view(B, 1, 1, 1), arange(H, device=device).view(1, H, 1, 1),
            arange(Q, device=device).view(1, 1, Q, 1), arange(KV, device=device).view(1, 1, 1, KV))


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device="cuda"):
    """The dense boolean mask ``(B, H, Q_LEN, KV_LEN)`` of ``mask_mod`` (``B``/``H`` None
    mean 1)."""
    from ember import device as _device
    B, H = B or 1, H or 1
    dev = "cpu" if _device(device).type not in ("cpu", "cuda") else device
    mask = mod_fn(*_indices(B, H, Q_LEN, KV_LEN, dev))
    return mask.to(_bool()).expand(B, H, Q_LEN, KV_LEN).contiguous()


class BlockMask:
    """A mask for :func:`flex_attention`: its ``mask_mod``, the sequence lengths and the
    dense element mask (``shape`` is ``(B, H, Q_LEN, KV_LEN)``). ``to_dense()`` gives
    PyTorch's block-level view: which ``BLOCK_SIZE`` blocks hold any kept score."""

    def __init__(self, mask, mask_mod, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE):
        self._mask = mask
        self.mask_mod = mask_mod
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.seq_lengths = tuple(mask.shape[-2:])

    @property
    def shape(self):
        B, H = self._mask.shape[:2]
        return (B, H, self.seq_lengths[0], self.seq_lengths[1])

    def to_dense(self):
        """A ``(B, H, Q blocks, KV blocks)`` int32 tensor: 1 where a block keeps a score."""
        from ember import int32
        from ember.nn import functional as F
        bq, bkv = self.BLOCK_SIZE
        q, kv = self.seq_lengths
        pad_q, pad_kv = -q % bq, -kv % bkv
        m = F.pad(self._mask.to(int32), (0, pad_kv, 0, pad_q))
        B, H, Qp, KVp = m.shape
        return m.view(B, H, Qp // bq, bq, KVp // bkv, bkv).amax(dim=(3, 5)).to(int32)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"BlockMask.{name} is not implemented in ember yet (ember "
                                  "keeps the dense mask, not PyTorch's block indices)")

    def __repr__(self):
        return f"BlockMask(shape={self.shape}, BLOCK_SIZE={self.BLOCK_SIZE})"


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda",
                      BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, _compile=False):
    """The :class:`BlockMask` of ``mask_mod`` over ``(B, H, Q_LEN, KV_LEN)``."""
    return BlockMask(create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device), mask_mod, BLOCK_SIZE)


@dataclass(frozen=True)
class AuxRequest:
    """Which extra outputs ``flex_attention(..., return_aux=AuxRequest(...))`` returns."""
    lse: bool = False
    max_scores: bool = False


@dataclass
class AuxOutput:
    """The extra outputs asked for with :class:`AuxRequest`."""
    lse: object = None
    max_scores: object = None


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *,
                   return_aux=None):
    """Attention of ``query`` ``(B, Hq, L, E)`` over ``key`` ``(B, Hkv, S, E)`` and
    ``value`` ``(B, Hkv, S, Ev)``: scores ``q·k * scale`` (default ``1/sqrt(E)``) through
    ``score_mod``, masked by ``block_mask``, softmax over the keys, times ``value``. A
    query whose every score is masked gets zeros (and a log-sum-exp of ``-inf``).
    ``return_lse`` (or ``return_aux``) also gives the natural-log log-sum-exp of the
    scores, ``(B, Hq, L)``."""
    from ember import where
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise ValueError("NYI: query, key, and value must be 4D tensors")
    B, Hq, L, E = query.shape
    Hkv, S = key.shape[1], key.shape[2]
    if Hq != Hkv:
        if not enable_gqa:
            raise ValueError(f"Expect query and key/value to have the same number of heads "
                             f"but got Hq={Hq} and Hkv={Hkv}. Try setting enable_gqa=True "
                             "for GQA.")
        if Hq % Hkv:
            raise ValueError(f"Expect number of query heads to be a multiple of kv heads "
                             f"for GQA but got Hq={Hq} and Hkv={Hkv}.")
        key = key.repeat_interleave(Hq // Hkv, dim=1)
        value = value.repeat_interleave(Hq // Hkv, dim=1)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is "
                         "deprecated, please use return_aux=AuxRequest(lse=True)")
    if return_lse:
        import warnings
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    b, h, q_idx, kv_idx = _indices(B, Hq, L, S, query.device)
    if score_mod is not None:
        scores = score_mod(scores, b, h, q_idx, kv_idx)
    if block_mask is not None:
        mask = block_mask.mask_mod(b, h, q_idx, kv_idx) if block_mask.mask_mod is not None \
            else block_mask._mask
        scores = where(mask, scores, _LARGE_NEGATIVE)
    lse = scores.logsumexp(dim=-1, keepdim=True)
    empty = lse == _LARGE_NEGATIVE
    probs = where(empty, 0.0, (scores - where(empty, 0.0, lse)).exp())
    out = (probs @ value).to(query.dtype)
    lse = lse.squeeze(-1)
    if return_aux is not None:
        aux = AuxOutput(lse=lse if return_aux.lse else None,
                        max_scores=scores.amax(dim=-1) if return_aux.max_scores else None)
        return out, aux
    if return_lse:
        return out, lse
    return out
