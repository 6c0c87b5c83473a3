"""Complex linear algebra against torch: PyTorch's OpInfo samples in complex128 and
complex64, forward values and dtypes, and first gradients (complex128, a random complex
upstream gradient for every differentiable output, gradients for every tensor input).
The ops whose complex path is not built yet must refuse complex input by name."""
import warnings

import numpy as np
import pytest
import torch
from test_numerics_opinfo import _close, _ember_op, _to_ember  # shared with it
from test_opinfo import _flat
from torch.testing._internal.common_methods_invocations import op_db

import ember

# (OpInfo name, variant): the ops with a complex path
DONE = {"linalg.det", "linalg.slogdet", "logdet", "linalg.inv", "linalg.inv_ex",
        "linalg.solve", "linalg.solve_ex", "linalg.solve_triangular", "linalg.cholesky",
        "linalg.cholesky_ex", "cholesky", "cholesky_inverse", "cholesky_solve", "linalg.eigh",
        "linalg.eigvalsh", "linalg.svd", "linalg.svdvals", "svd", "linalg.qr", "qr", "linalg.pinv",
        "pinverse", "linalg.matrix_rank", "linalg.cond", "linalg.lstsq", "geqrf", "linalg.norm",
        "linalg.matrix_norm", "norm", "linalg.matrix_power", "linalg.tensorinv",
        "linalg.tensorsolve", "triangular_solve", "matrix_exp", "lu", "lu_solve", "lu_unpack",
        "linalg.lu_factor", "linalg.lu_factor_ex", "linalg.lu", "linalg.lu_solve",
        "linalg.ldl_factor", "linalg.ldl_factor_ex", "linalg.ldl_solve", "logcumsumexp"}
# linalg.pinv's 'singular' variant calls its op through a wrapper of torch functions
OPS = [o for o in op_db if o.name in DONE and o.variant_test_name != "singular"]
SAMPLES = 48  # per op and dtype


def test_every_op_is_covered():
    assert {o.name for o in OPS} == DONE


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name + ("." + o.variant_test_name
                                                             if o.variant_test_name else ""))
def test_complex_samples(op):
    compared, _ = check_op(op, SAMPLES)
    assert compared


def check_op(op, limit):
    """Compare ``op``'s first ``limit`` samples per dtype; returns (forward samples,
    gradient samples) compared, raising at the first difference."""
    fn = _ember_op(op.name)
    compared = graded = 0
    for dt in (torch.complex64, torch.complex128):
        grad = dt == torch.complex128 and op.supports_autograd
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            samples = list(op.sample_inputs("cpu", dt, requires_grad=grad))[:limit]
        for i, s in enumerate(samples):
            t_out = s.output_process_fn_grad(op(s.input, *s.args, **s.kwargs))
            e_in, e_args, e_kw = _to_ember(s.input), _to_ember(s.args), _to_ember(s.kwargs)
            e_out = s.output_process_fn_grad(fn(e_in, *e_args, **e_kw))
            tol = 1e-3 if dt == torch.complex64 else 1e-7
            t_flat, e_flat = _flat(t_out), _flat(e_out)
            for e, t in zip(e_flat, t_flat):
                _close(e, t, tol)
            compared += 1
            if not grad:
                continue
            t_leaves = [t for t in _flat([s.input, list(s.args)])
                        if isinstance(t, torch.Tensor) and t.requires_grad]
            e_leaves = [t for t in _flat([e_in, list(e_args)])
                        if isinstance(t, ember.Tensor) and t.requires_grad]
            pairs = [(e, t) for e, t in zip(e_flat, t_flat)
                     if isinstance(t, torch.Tensor) and t.requires_grad]
            rng = np.random.default_rng(i)
            gos = []
            for _, t in pairs:
                go = rng.standard_normal(tuple(t.shape))
                if t.is_complex():
                    go = go + 1j * rng.standard_normal(tuple(t.shape))
                gos.append(go.astype(t.detach().resolve_conj().numpy().dtype))
            tg = torch.autograd.grad([t for _, t in pairs], t_leaves,
                                     [torch.tensor(g) for g in gos], allow_unused=True)
            eg = ember.autograd.grad([e for e, _ in pairs], e_leaves,
                                     [ember.tensor(g) for g in gos], allow_unused=True)
            for e, t in zip(eg, tg):
                if t is None:
                    assert e is None or not e.numpy().any()
                else:
                    _close(e, t, 1e-6)
            graded += 1
    return compared, graded


if __name__ == "__main__":  # every sample of every op, with the counts
    for o in OPS:
        print(o.name, o.variant_test_name, *check_op(o, 10 ** 6))


def _phase_loss(lib, a, which):
    A = lib.tensor(a, requires_grad=True)
    if which == "svd":
        U, S, Vh = lib.linalg.svd(A, full_matrices=False)
        loss = U.real.sum() + S.sum()
    else:
        L, V = lib.linalg.eigh(A)
        loss = V.real.sum() + L.sum()
    loss.backward()


@pytest.mark.parametrize("which", ["svd", "eigh"])
def test_phase_dependent_loss_raises_as_torch(which):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
    if which == "eigh":
        a = a + a.conj().T
    with pytest.raises(RuntimeError) as t_err:
        _phase_loss(torch, a, which)
    with pytest.raises(RuntimeError) as e_err:
        _phase_loss(ember, a, which)
    assert str(e_err.value) == str(t_err.value)


def test_gauge_invariant_svd_loss_matches_torch():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))
    grads = []
    for lib in (torch, ember):
        A = lib.tensor(a, requires_grad=True)
        U, S, Vh = lib.linalg.svd(A, full_matrices=False)
        ((U[:, :2] @ Vh[:2]).abs() ** 2).sum().backward()
        grads.append(A.grad.resolve_conj().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-8, atol=1e-10)


def test_op_without_complex_path_names_itself():
    from ember.ops._linalg_util import _check_float
    x = ember.tensor(np.eye(2, dtype=np.complex128))
    with pytest.raises(NotImplementedError, match="linalg.example: complex input "
                       r"\(Complex128\) is not supported yet"):
        _check_float("linalg.example", x)
    _check_float("linalg.det", x)  # a built path passes


def test_complex32_is_named_low_precision():
    x = ember.eye(2).to(ember.complex32)
    with pytest.raises(RuntimeError, match="linalg.inv: Low precision dtypes not supported. "
                       "Got ComplexHalf"):
        ember.linalg.inv(x)


# forward mode: eigh and cholesky_inverse are fed non-Hermitian tangents by this harness
# (torch's own check wraps them; their real samples differ the same way), and torch's
# complex logcumsumexp tangent is NaN on samples of 10,000 (see docs/opinfo.md)
FW_OPS = [o for o in OPS if o.supports_forward_ad
          and o.name not in ("linalg.eigh", "cholesky_inverse", "logcumsumexp")]


@pytest.mark.parametrize("op", FW_OPS, ids=lambda o: o.name + ("." + o.variant_test_name
                                                                if o.variant_test_name else ""))
def test_complex_forward_ad(op):
    import torch.autograd.forward_ad as tfw

    import ember.autograd.forward_ad as efw
    fn = _ember_op(op.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = list(op.sample_inputs("cpu", torch.complex128))[:6]
    for i, s in enumerate(samples):
        x = s.input.detach().resolve_conj().numpy()
        rng = np.random.default_rng(i)
        t = (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)).astype(x.dtype)
        with warnings.catch_warnings(), tfw.dual_level():
            warnings.simplefilter("ignore")
            out = op(tfw.make_dual(torch.tensor(x), torch.tensor(t)), *s.args, **s.kwargs)
            tt = [tfw.unpack_dual(o).tangent for o in _flat(s.output_process_fn_grad(out))
                  if isinstance(o, torch.Tensor)]
        with efw.dual_level():
            out = fn(efw.make_dual(ember.tensor(x), ember.tensor(t)), *_to_ember(s.args),
                     **_to_ember(s.kwargs))
            et = [efw.unpack_dual(o).tangent for o in _flat(s.output_process_fn_grad(out))
                  if isinstance(o, ember.Tensor)]
        for e, t_ in zip(et, tt):
            if t_ is None:
                assert e is None or not e.resolve_conj().numpy().any()
            elif e is None:
                assert not t_.resolve_conj().numpy().any()
            else:
                _close(e, t_, 1e-6)
