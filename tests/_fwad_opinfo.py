"""Drive ember's forward-mode AD from PyTorch's OpInfo database (used by test_forward_ad)."""
import random
import warnings

import numpy as np
import torch
import torch.autograd.forward_ad as tfw

import ember
import ember.autograd.forward_ad as efw

SAMPLES = 2  # per op


# OpInfo entries whose ``op`` is a lambda reordering the arguments of the public function
_REORDERED = {
    "where": lambda x, cond, other: ember.where(cond, x, other),
    "einsum": lambda tensors, eq: ember.einsum(eq, tensors),
    "polygamma": lambda x, n: ember.polygamma(n, x),
    "special.polygamma": lambda x, n: ember.special.polygamma(n, x),
    "nn.functional.embedding": lambda w, idx, **k: ember.nn.functional.embedding(idx, w, **k),
    "__rdiv__": lambda x, other: x.__rtruediv__(other),
    "T": lambda x: x.T, "H": lambda x: x.H, "mT": lambda x: x.mT, "mH": lambda x: x.mH,
    "double": lambda x, *a, **k: x.double(*a, **k),
    "cdouble": lambda x, *a, **k: x.cdouble(*a, **k),
}


def ember_fn(name):
    """ember's function for an OpInfo name, or None when ember lacks it."""
    if name in _REORDERED:
        return _REORDERED[name]
    if name.startswith("__") or name in ("real", "imag"):
        return lambda x, *a, **k: (getattr(x, name) if name in ("real", "imag") else
                                   getattr(x, name)(*a, **k))
    obj = ember
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if obj is not None:
        return obj
    if "." not in name and hasattr(ember.Tensor, name):
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    return None


# ops of a Hermitian matrix that read one triangle (OpInfo draws non-Hermitian samples and
# checks gradients through ``gradcheck_wrapper_hermitian_input``): their tangents are
# compared for Hermitian tangents. For a tangent off the Hermitian matrices torch's forward
# rule takes the whole tangent, which no eigenvector derivative matches (it breaks V^H V = I
# to first order); ember's is the rule on the tangent's Hermitian part, the adjoint of the
# backward both share (tests/test_forward_ad.py, test_eigh_tangent_off_the_symmetric_...)
HERMITIAN_INPUT = {"linalg.eigh", "linalg.eigvalsh"}
# ops whose eigenvector columns are defined up to sign (a phase for complex): ember's
# columns (and their tangents) are turned to torch's before comparing
COLUMN_GAUGE = {"linalg.eigh": 1}  # which output holds the eigenvectors


# complex SVDs: (U's output, V's or Vh's output, whether it is Vh). A joint phase of a
# column of U and of V is free, so is its tangent's part U diag(i theta) (V alike): torch
# and ember fix it otherwise; both tangents are brought to Im diag(U^H dU) = 0 first
SVD_GAUGE = {"svd": (0, 2, False), "linalg.svd": (0, 2, True)}


def _hermitian(tan):
    return (tan + np.conj(np.swapaxes(tan, -1, -2))) / 2


def _align_columns(e_primal, e_tangent, t_primal):
    """ember's eigenvectors and their tangent turned column by column to torch's sign or
    phase (a tangent follows the same factor: the rules are equivariant)."""
    c = (np.conj(e_primal) * t_primal).sum(-2, keepdims=True)
    mag = np.abs(c)
    phase = np.where(mag > 0, c / np.where(mag > 0, mag, 1), 1)
    return e_primal * phase, (None if e_tangent is None else e_tangent * phase)


def _svd_gauge_free(lib, fw, outs, where):
    """``outs`` (a list of dual tensors of ``lib``) with the tangents of U and V (or Vh)
    moved to the gauge Im diag(U^H dU) = 0 over the first k = min(m, n) columns."""
    def arrays(t):
        primal, tangent = fw.unpack_dual(t)
        if tangent is None:
            return None, None
        if lib is torch:
            primal, tangent = primal.resolve_conj(), tangent.resolve_conj()
        return primal.detach().numpy(), tangent.detach().numpy()
    iu, iv, vh = where
    (U, dU), (V, dV) = arrays(outs[iu]), arrays(outs[iv])
    if dU is None or dV is None:
        return outs
    k = fw.unpack_dual(outs[1]).primal.shape[-1]
    theta = np.einsum("...ij,...ij->...j", np.conj(U[..., :k]), dU[..., :k]).imag
    dU = dU.copy()
    dV = dV.copy()
    dU[..., :k] -= U[..., :k] * (1j * theta)[..., None, :]
    if vh:
        dV[..., :k, :] += (1j * theta)[..., :, None] * V[..., :k, :]
    else:
        dV[..., :k] -= V[..., :k] * (1j * theta)[..., None, :]
    outs = list(outs)
    outs[iu] = fw.make_dual(lib.tensor(U), lib.tensor(dU))
    outs[iv] = fw.make_dual(lib.tensor(V), lib.tensor(dV))
    return outs


class _Pair:
    """Matched torch and ember arguments built from one OpInfo sample, tangents attached
    to the tensors of ``dtype`` (complex tangents for a complex dtype)."""

    def __init__(self, rng, dtype=torch.float64, other=None, hermitian=False):
        self.rng = rng
        self.dtype = dtype
        self.other = other  # ember's value for any other argument (default: itself)
        self.hermitian = hermitian  # tangents of square matrices made Hermitian

    def convert(self, x, dual):
        if isinstance(x, torch.Tensor):
            arr = x.detach().resolve_conj().numpy().copy()
            e = ember.tensor(arr)
            if dual and x.dtype == self.dtype:
                tan = self.rng.standard_normal(arr.shape)
                if x.is_complex():
                    tan = tan + 1j * self.rng.standard_normal(arr.shape)
                if self.hermitian and arr.ndim >= 2 and arr.shape[-1] == arr.shape[-2]:
                    tan = _hermitian(tan)
                return (tfw.make_dual(x.detach(), torch.tensor(tan)),
                        efw.make_dual(e, ember.tensor(tan)))
            return x, e
        if isinstance(x, torch.dtype):
            return x, getattr(ember, str(x).replace("torch.", ""))
        if isinstance(x, (list, tuple)):
            pairs = [self.convert(v, dual) for v in x]
            return type(x)(p[0] for p in pairs), type(x)(p[1] for p in pairs)
        if isinstance(x, dict):
            pairs = {k: self.convert(v, dual) for k, v in x.items()}
            return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
        return x, x if self.other is None else self.other(x)


def _numel(x):
    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, (list, tuple)):
        return sum(_numel(v) for v in x)
    return 0


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _flat(o)]
    return [out]


def check_op(op, samples=SAMPLES, dtype=torch.float64, fn=None, other=None):
    """``(status, detail)`` for ``op``'s first ``samples`` samples in ``dtype``: "pass"
    (tangents equal torch's on every sample ember's forward computes as torch does),
    "tangent" (a mismatch: a forward-AD bug), "missing" (ember lacks the function) or
    "forward" (ember's forward raises or differs on every sample: not a forward-AD matter).
    ``fn`` replaces ember's function found by ``ember_fn``; ``other(x)`` gives ember's
    twin of an argument that is no tensor, dtype or container (a torch function passed as
    a distance function)."""
    fn = ember_fn(op.name) if fn is None else fn
    if fn is None:
        return "missing", op.name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # the generator itself: ``op.sample_inputs`` wraps it in a tracker that walks
            # the whole Python stack for every sample (slow under pytest)
            # (seeded: OpInfo draws its samples from torch's global generator, and a draw
            # with nearly equal eigenvalues makes eigenvector tangents ill-conditioned)
            # (and Python's: eigh's samples pick UPLO with ``random.choice``)
            torch.manual_seed(0)
            random.seed(0)
            all_samples = iter(op.sample_inputs_func(op, "cpu", dtype, False))
        except Exception as e:  # noqa: BLE001 - torch's own sample generator
            return "forward", f"samples: {e}"
    checked = 0
    problem = None
    for k in range(samples + 3):  # a few spares for samples torch itself refuses
        if checked >= samples:
            break
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                s = next(all_samples)
            except StopIteration:
                break
        if checked and _numel(s.input) > 300:
            continue  # past the first, small samples only (the rules are the same)
        rng = np.random.default_rng(k)
        conv = _Pair(rng, dtype, other, hermitian=op.name in HERMITIAN_INPUT)
        with tfw.dual_level(), efw.dual_level():
            (ti, ei) = conv.convert(s.input, True)
            (ta, ea) = conv.convert(list(s.args), True)
            (tk, ek) = conv.convert(dict(s.kwargs), False)
            try:
                t_out = op.op(ti, *ta, **tk)
            except Exception:  # noqa: BLE001 - torch itself refuses this sample
                continue
            try:
                e_out = fn(ei, *ea, **ek)
            except Exception as e:  # noqa: BLE001
                problem = problem or f"ember raised {type(e).__name__}: {e}"[:200]
                continue
            tf, ef = _flat(t_out), _flat(e_out)
            if len(tf) != len(ef):
                problem = problem or "output structure differs"
                continue
            if op.name in SVD_GAUGE and dtype.is_complex:
                tf = _svd_gauge_free(torch, tfw, tf, SVD_GAUGE[op.name])
                ef = _svd_gauge_free(ember, efw, ef, SVD_GAUGE[op.name])
            if op.name in COLUMN_GAUGE:
                j = COLUMN_GAUGE[op.name]
                ep, et = efw.unpack_dual(ef[j])
                ep, et = _align_columns(ep.detach().numpy(),
                                        None if et is None else et.detach().numpy(),
                                        tfw.unpack_dual(tf[j]).primal.detach().numpy())
                ef[j] = efw.make_dual(ember.tensor(ep), ember.tensor(et)) if et is not None \
                    else ember.tensor(ep)
            ok_primal = True
            for t, e in zip(tf, ef):
                if isinstance(t, torch.Tensor):
                    tp = tfw.unpack_dual(t).primal.detach().resolve_conj()
                    if not isinstance(e, ember.Tensor) or tuple(e.shape) != tuple(tp.shape) \
                            or not np.allclose(efw.unpack_dual(e).primal.detach().numpy(),
                                               tp.numpy(), rtol=1e-6, atol=1e-7,
                                               equal_nan=True):
                        ok_primal = False
            if not ok_primal:
                problem = problem or "primal differs from torch"
                continue
            for j, (t, e) in enumerate(zip(tf, ef)):
                if not isinstance(t, torch.Tensor):
                    continue
                tt = tfw.unpack_dual(t).tangent
                if tt is not None:
                    tt = torch.zeros_like(tt) if tt._is_zerotensor() else tt.resolve_conj()
                et = efw.unpack_dual(e).tangent
                if tt is None:
                    if et is not None and np.any(et.detach().numpy() != 0):
                        return "tangent", f"output {j}: ember has a tangent, torch none"
                    continue
                if et is None:
                    if np.any(tt.numpy() != 0):
                        return "tangent", f"output {j}: ember has no tangent"
                    continue
                # where the output itself is infinite or NaN its derivative is a
                # convention (torch often gives NaN there): those elements are not compared
                finite = np.isfinite(tfw.unpack_dual(t).primal.detach().resolve_conj().numpy())
                if tuple(et.shape) != tuple(tt.shape) or not np.allclose(
                        et.detach().numpy()[finite], tt.numpy()[finite], rtol=1e-5, atol=1e-6,
                        equal_nan=True):
                    return "tangent", (f"sample {k} output {j}: tangents differ, ember "
                                       f"{et.detach().numpy().ravel()[:4]} torch "
                                       f"{tt.numpy().ravel()[:4]}")
            checked += 1
    if checked == 0:
        return "forward", problem or "no sample ran"
    return "pass", checked
