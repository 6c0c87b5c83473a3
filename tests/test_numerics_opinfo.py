"""PyTorch's OpInfo samples for the fft, signal.windows and complex-dtype ops: ember's
forward (values and dtypes) and first gradients (float64/complex128 samples, complex
grad_outputs) against torch. A few samples per op and dtype keep this fast; the
report counts ops (see docs/numerics.md)."""
import warnings

import numpy as np
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import ember

NAMES = ("view_as_complex", "view_as_real", "angle", "polar", "complex", "real", "imag",
         "conj", "conj_physical", "resolve_conj", "isreal", "abs")
OPS = [o for o in op_db if o.name.startswith(("fft.", "signal.windows.")) or o.name in NAMES]
SAMPLES = 3  # per op and dtype


def _to_ember(x):
    if isinstance(x, torch.Tensor):
        return ember.tensor(x.detach().resolve_conj().numpy().copy(),
                            requires_grad=x.requires_grad)
    if isinstance(x, torch.dtype):
        return getattr(ember, str(x).replace("torch.", ""))
    if isinstance(x, (list, tuple)):
        return type(x)(_to_ember(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_ember(v) for k, v in x.items()}
    return x


def _ember_op(name):
    if name in ("real", "imag"):
        return lambda x: getattr(x, name)
    obj = ember
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _close(e, t, tol):
    t = t.detach().resolve_conj()
    assert e.dtype.name == str(t.dtype).replace("torch.", "")
    np.testing.assert_allclose(e.detach().resolve_conj().numpy(), t.numpy(), rtol=tol, atol=tol)


def test_every_op_is_covered():
    assert len(OPS) == 43, sorted(o.name for o in OPS)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_opinfo_samples(op):
    fn = _ember_op(op.name)
    checked = 0
    for dt in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        if dt not in op.supported_dtypes("cpu"):
            continue
        grad = dt in (torch.float64, torch.complex128) and op.supports_autograd
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            samples = list(op.sample_inputs("cpu", dt, requires_grad=grad))[:SAMPLES]
        for s in samples:
            t_out = op(s.input, *s.args, **s.kwargs)
            e_in = _to_ember(s.input)
            e_out = fn(e_in, *_to_ember(s.args), **_to_ember(s.kwargs))
            tol = 1e-4 if dt in (torch.float32, torch.complex64) else 1e-8
            _close(e_out, t_out, tol)
            checked += 1
            if grad and isinstance(s.input, torch.Tensor) and t_out.requires_grad:
                rng = np.random.default_rng(checked)
                shape = tuple(t_out.shape)
                go = rng.standard_normal(shape)
                if t_out.is_complex():
                    go = go + 1j * rng.standard_normal(shape)
                go = go.astype(t_out.detach().resolve_conj().numpy().dtype)
                tg, = torch.autograd.grad(t_out, s.input, torch.tensor(go), allow_unused=True)
                eg, = ember.autograd.grad(e_out, e_in, ember.tensor(go), allow_unused=True)
                if tg is None:
                    assert eg is None or not eg.numpy().any()
                else:
                    _close(eg, tg, 1e-8)
    assert checked
