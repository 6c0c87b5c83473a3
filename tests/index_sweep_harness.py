"""Run one sweep case on ember and on torch 2.13.0 and say whether they agree.

A case is ``fn(E)``: ``E.m`` is the module (``ember`` or ``torch``) and ``E.t`` builds
an input from NumPy data in a chosen dtype and layout (contiguous, transposed,
strided), optionally as a leaf that requires grad. The outcome compared is either the
exception (torch's exception class must be among the ember one's bases) or the
result: type, shape, dtype, values (bits for integers and bools, NaN in the same
places, -0.0 where torch has it), the output's node name, and the gradients of every
leaf for a seeded ``grad_output`` (or the backward error).
"""
import numpy as np
import torch

import ember

DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
          "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
          "b": np.bool_, "c64": np.complex64}


class Env:
    """The builder a case sees: its module and a factory of seeded inputs."""

    def __init__(self, m):
        self.m = m
        self.leaves = []
        self.rng = np.random.default_rng(0)

    def t(self, data, dtype="f32", grad=False, layout="c"):
        """A tensor of ``data`` (array-like, or a shape tuple for seeded normals)."""
        if isinstance(data, tuple) and all(isinstance(d, int) for d in data):
            a = self.rng.standard_normal(data)
        else:
            a = np.asarray(data)
        a = a.astype(DTYPES[dtype]) if dtype in DTYPES else a
        m = self.m
        if layout == "T" and a.ndim >= 2:
            base = m.from_numpy(np.ascontiguousarray(np.swapaxes(a, -1, -2)))
            if grad:
                base.requires_grad_(True)
                self.leaves.append(base)
            return base.transpose(-1, -2)
        if layout == "s" and a.ndim >= 1:
            wide = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), dtype=a.dtype)
            wide[..., ::2] = a
            base = m.from_numpy(wide)
            if grad:
                base.requires_grad_(True)
                self.leaves.append(base)
            return base[..., ::2]
        x = m.from_numpy(a.copy())
        if grad:
            x.requires_grad_(True)
            self.leaves.append(x)
        return x

    def i(self, data, dtype="i64", layout="c"):
        """An index tensor (int64 unless told)."""
        return self.t(data, dtype=dtype, layout=layout)


def _exc(e):
    return ("raise", type(e), str(e).splitlines()[0][:160] if str(e) else "")


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _flat(x)]
    return [out]


def outcome(fn, m):
    """Run ``fn`` under module ``m``: ("raise", cls, msg) or ("ok", result, env, grads)."""
    env = Env(m)
    try:
        out = fn(env)
    except Exception as e:  # the outcome being compared
        return _exc(e)
    grads = None
    tensors = [o for o in _flat(out) if isinstance(o, m.Tensor)]
    diff = [o for o in tensors if o.requires_grad]
    if env.leaves and diff:
        rng = np.random.default_rng(1)
        try:
            total = None
            for o in diff:
                go = rng.standard_normal(tuple(o.shape)).astype(np.float64)
                w = m.from_numpy(go).to(o.dtype)
                term = (o * w).sum()
                total = term if total is None else total + term
            total.backward()
            grads = [leaf.grad for leaf in env.leaves]
        except Exception as e:
            grads = _exc(e)
    return ("ok", out, env, grads)


def _dtype_name(dt):
    return str(dt).split(".")[-1]


def _node(t):
    g = t.grad_fn
    if g is None:
        return None
    return g.name() if hasattr(g, "name") else type(g).__name__


def _same_values(ea, ta, rtol):
    if ea.shape != ta.shape:
        return False
    if ea.dtype.kind in "biu":
        return np.array_equal(ea, ta)
    if ea.dtype.kind == "c":
        return _same_values(ea.real, ta.real, rtol) and _same_values(ea.imag, ta.imag, rtol)
    ea = ea.astype(np.float64)
    ta = ta.astype(np.float64)
    if not np.array_equal(np.isnan(ea), np.isnan(ta)):
        return False
    ok = ~np.isnan(ta)
    if not np.allclose(ea[ok], ta[ok], rtol=rtol, atol=rtol * 1e-3):
        return False
    zeros = ok & (ta == 0)
    return np.array_equal(np.signbit(ea[zeros]), np.signbit(ta[zeros]))


def compare_value(e, t, what, rtol):
    """'' when ember's value ``e`` matches torch's ``t``, else what differs."""
    if isinstance(t, torch.Tensor):
        if not isinstance(e, ember.Tensor):
            return f"{what}: {type(e).__name__}, torch a Tensor"
        if t.is_sparse or getattr(e, "is_sparse", False):
            if not (t.is_sparse and getattr(e, "is_sparse", False)):
                return f"{what}: sparse {getattr(e, 'is_sparse', False)} != {t.is_sparse}"
            e, t = e.to_dense(), t.to_dense()
        if tuple(e.shape) != tuple(t.shape):
            return f"{what}: shape {tuple(e.shape)} != {tuple(t.shape)}"
        if _dtype_name(e.dtype) != _dtype_name(t.dtype):
            return f"{what}: dtype {_dtype_name(e.dtype)} != {_dtype_name(t.dtype)}"
        if e.requires_grad != t.requires_grad:
            return f"{what}: requires_grad {e.requires_grad} != {t.requires_grad}"
        if _node(e) != _node(t):
            return f"{what}: node {_node(e)} != {_node(t)}"
        bf16 = t.dtype == torch.bfloat16  # NumPy has no bfloat16: compared as float32
        ea = (e.detach().float() if bf16 else e.detach()).numpy()
        ta = (t.detach().float() if bf16 else t.detach().resolve_conj()).numpy()
        if not _same_values(np.asarray(ea), np.asarray(ta), rtol):
            return f"{what}: values {ea.tolist()} != {ta.tolist()}"
        return ""
    if isinstance(t, (tuple, list)):
        if not isinstance(e, (tuple, list)) or len(e) != len(t):
            return f"{what}: {type(e).__name__} of {len(e) if hasattr(e, '__len__') else '?'}" \
                   f" != {type(t).__name__} of {len(t)}"
        for k, (a, b) in enumerate(zip(e, t)):
            msg = compare_value(a, b, f"{what}[{k}]", rtol)
            if msg:
                return msg
        return ""
    if t is None:
        return "" if e is None else f"{what}: {e!r} != None"
    if type(e) is not type(t) and not isinstance(e, ember.Tensor):
        return f"{what}: {type(e).__name__} != {type(t).__name__}"
    return "" if e == t else f"{what}: {e!r} != {t!r}"


def _same_raise(er, tr):
    names = {c.__name__ for c in er[1].__mro__}
    return tr[1].__name__ in names


def compare(fn, rtol=1e-6):
    """'' when ember and torch agree on case ``fn``, else a line saying how not."""
    tr = outcome(fn, torch)
    er = outcome(fn, ember)
    if tr[0] == "raise" or er[0] == "raise":
        if tr[0] != er[0]:
            if tr[0] == "raise":
                return f"torch raises {tr[1].__name__}: {tr[2]}; ember returns"
            return f"ember raises {er[1].__name__}: {er[2]}; torch returns"
        if not _same_raise(er, tr):
            return f"raise {er[1].__name__} ({er[2]}) != torch {tr[1].__name__} ({tr[2]})"
        return ""
    msg = compare_value(er[1], tr[1], "out", rtol)
    if msg:
        return msg
    tg, eg = tr[3], er[3]
    if isinstance(tg, tuple) or isinstance(eg, tuple):
        if not (isinstance(tg, tuple) and isinstance(eg, tuple) and _same_raise(eg, tg)):
            return f"backward: ember {eg if isinstance(eg, tuple) else 'ok'} != " \
                   f"torch {tg if isinstance(tg, tuple) else 'ok'}"
        return ""
    if tg is not None or eg is not None:
        if (tg is None) != (eg is None):
            return f"grads: ember {'none' if eg is None else 'some'} != torch"
        return compare_value(eg, tg, "grad", rtol)
    return ""
