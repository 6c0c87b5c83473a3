"""Finite-difference checks of gradients: ``gradcheck`` and ``gradgradcheck``.

The numerical Jacobian is built by central differences, perturbing each input
element in place by ``±eps``; the analytical one row by row with
``autograd.grad`` and one-hot ``grad_outputs``. Both are laid out as PyTorch's:
``(input.numel(), output.numel())`` per (output, input) pair.
"""
import warnings

import numpy as np

from ember._tensor import Tensor, _make

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "get_numerical_jacobian",
           "get_analytical_jacobian"]


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` and ``gradgradcheck`` when a check fails."""


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _diff_inputs(inputs):
    return [(i, t) for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]


def _check_inputs(inputs):
    any_rg = False
    for idx, inp in enumerate(inputs):
        if isinstance(inp, Tensor) and inp.requires_grad:
            if inp.dtype.name not in ("float64", "complex128"):
                warnings.warn(f"Input #{idx} requires gradient and is not a double precision "
                              "floating point or complex. This check will likely fail if all "
                              "the inputs are not of double precision floating point or "
                              "complex. ", UserWarning, stacklevel=3)
            if not all(st > 0 or sz <= 1 for st, sz in zip(inp.stride(), inp.shape)):
                raise RuntimeError(
                    f"The {idx}th input has a dimension with stride 0. gradcheck only supports "
                    "inputs that are non-overlapping to be able to compute the numerical "
                    "gradients correctly. You should call .contiguous on the input before "
                    "passing it to gradcheck.")
            any_rg = True
    if not any_rg:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")


def _outputs_as_float(out):
    res = []
    for o in _as_tuple(out):
        if isinstance(o, Tensor):
            res.append(np.array(o.detach()._host(), dtype=np.float64, copy=True))
    return res


def get_numerical_jacobian(fn, inputs, outputs=None, target=None, eps=1e-3,
                           grad_out=1.0):
    """The central-difference Jacobians of ``fn(*inputs)``, one tuple per input.

    Returns, for each input that requires grad, a tuple with one ``(input.numel(),
    output.numel())`` float64 tensor per output.
    """
    inputs = _as_tuple(inputs)
    target = inputs if target is None else _as_tuple(target)
    jac = _numerical(fn, inputs, target, eps)
    return [tuple(_make(j * grad_out) for j in per_in) for per_in in jac]


def _numerical(fn, inputs, target, eps):
    """[input][output] -> ndarray (input.numel(), output.numel()) in float64."""
    base = _outputs_as_float(fn(*inputs))
    result = []
    for _, inp in _diff_inputs(target):
        # the input's memory is perturbed directly: its version counter does not move,
        # as with PyTorch's ``.data``
        arr = inp._data
        n = arr.size
        cols = [np.zeros((n, b.size)) for b in base]
        for k in range(n):
            idx = np.unravel_index(k, arr.shape) if arr.ndim else ()
            orig = arr[idx]
            arr[idx] = orig - eps
            lo = _outputs_as_float(fn(*inputs))
            arr[idx] = orig + eps
            hi = _outputs_as_float(fn(*inputs))
            arr[idx] = orig
            for c, a, b in zip(cols, lo, hi):
                c[k] = ((b - a) / (2 * eps)).reshape(-1)
        result.append(cols)
    return result


def _analytical(inputs, output, nondet_tol, check_grad_dtypes):
    """[input] -> ndarray (input.numel(), output.numel()) for one differentiable output."""
    from ember import autograd
    diff = [t for _, t in _diff_inputs(inputs)]
    n_out = output.numel()
    xp_zeros = np.zeros
    rows = []
    for _ in range(2):  # twice, to check that backward is deterministic (reentrant)
        jac = [xp_zeros((t.numel(), n_out)) for t in diff]
        types_ok = sizes_ok = True
        for j in range(n_out):
            go = np.zeros(output._data.shape, dtype=output._data.dtype)
            go.reshape(-1)[j] = 1
            grads = autograd.grad(output, diff, _make(go), retain_graph=True,
                                  allow_unused=True)
            for k, (g, t) in enumerate(zip(grads, diff)):
                if g is None:
                    continue
                if g.dtype is not t.dtype:
                    types_ok = False
                if tuple(g.shape) != tuple(t.shape):
                    sizes_ok = False
                    continue
                jac[k][:, j] = np.asarray(g.detach()._host(), dtype=np.float64).reshape(-1)
        rows.append(jac)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    for a, b in zip(*rows):
        if a.size and np.max(np.abs(a - b)) > nondet_tol:
            raise GradcheckError(
                "Backward is not reentrant, i.e., running backward with same input and "
                "grad_output multiple times gives different values, although analytical "
                f"gradient matches numerical gradient.The tolerance for nondeterminism was "
                f"{nondet_tol}.")
    return rows[0]


def get_analytical_jacobian(inputs, output, nondet_tol=0.0, grad_out=1.0):
    """The Jacobians of ``output`` w.r.t. ``inputs`` computed by backward, as tensors."""
    jac = _analytical(_as_tuple(inputs), output, nondet_tol, False)
    return tuple(_make(j * grad_out) for j in jac), True, True, True


def _mismatch(a, n, i, j):
    return (f"Jacobian mismatch for output {i:d} with respect to input {j:d},\n"
            f"numerical:{_make(n)!r}\nanalytical:{_make(a)!r}\n")


def _unsupported(**flags):
    for name, on in flags.items():
        if on:
            raise NotImplementedError(f"gradcheck({name}=True): ember has no batching "
                                      "rules to check")


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check gradients computed by backward against finite differences.

    For each input that requires grad (use float64), the Jacobian from
    ``autograd.grad`` must satisfy ``|analytical - numerical| <= atol + rtol *
    |numerical|`` elementwise. Returns True, or raises :class:`GradcheckError`
    (a RuntimeError) showing both Jacobians; with ``raise_exception=False``
    returns False instead.

    ``fast_mode=True`` runs the full (slow) check, which is stricter.
    ``check_undefined_grad`` checks that zero output gradients give zero input
    gradients (ember has no undefined gradients: missing ones are zeros).

        >>> x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
        >>> ember.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
        True
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad "
                             "to be True")
    _unsupported(check_batched_grad=check_batched_grad,
                 check_batched_forward_grad=check_batched_forward_grad)
    try:
        return _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_grad_dtypes,
                          check_undefined_grad, check_forward_ad, check_backward_ad)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _realified(func, inputs):
    """``func`` and ``inputs`` with every complex tensor seen as real pairs (a trailing
    dim of 2), in and out. Checking the real function checks PyTorch's convention for
    complex gradients: the gradient of ``z = x + iy`` is ``dL/dx + i dL/dy``."""
    from ember.ops.complex_numbers import view_as_complex, view_as_real
    cplx = [isinstance(t, Tensor) and t._data.dtype.kind == "c" for t in inputs]
    new_inputs = tuple(_make(view_as_real(t.detach())._data.copy(), t.requires_grad) if c else t
                       for t, c in zip(inputs, cplx))

    def real_func(*xs):
        out = func(*[view_as_complex(x) if c else x for x, c in zip(xs, cplx)])
        outs = tuple(view_as_real(o) if isinstance(o, Tensor) and o._data.dtype.kind == "c"
                     else o for o in _as_tuple(out))
        return outs if isinstance(out, (tuple, list)) else outs[0]
    return real_func, new_inputs


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_grad_dtypes,
               check_undefined_grad, check_forward_ad=False, check_backward_ad=True):
    inputs = _as_tuple(inputs)
    func, inputs = _realified(func, inputs)
    _check_inputs(inputs)
    out = _as_tuple(func(*inputs))
    tensors_out = [o for o in out if isinstance(o, Tensor)]
    numerical = _numerical(func, inputs, inputs, eps)  # [input][output]
    if check_forward_ad:
        forward = _forward_jacobian(func, inputs)  # [input][output]
        for j, per_in in enumerate(forward):
            for i, a in enumerate(per_in):
                if not np.allclose(a, numerical[j][i], rtol=rtol, atol=atol):
                    raise GradcheckError("While considering the forward AD gradient:\n" +
                                         _mismatch(a, numerical[j][i], i, j))
    if not check_backward_ad:
        return True
    diff_out = [(i, o) for i, o in enumerate(tensors_out) if o.requires_grad]
    if not diff_out:
        for per_in in numerical:
            for jac in per_in:
                if np.count_nonzero(jac):
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    for pos, (i, o) in enumerate(diff_out):
        analytical = _analytical(inputs, o, nondet_tol, check_grad_dtypes)
        for j, a in enumerate(analytical):
            n = numerical[j][i]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                raise GradcheckError(_mismatch(a, n, pos, j))
    _check_zero_grad_outputs([o for _, o in diff_out], inputs)
    return True


def _forward_jacobian(func, inputs):
    """[input][output] -> ndarray (input.numel(), output.numel()): one forward-mode pass
    per input element, with a one-hot tangent."""
    from ember.autograd import forward_ad as fwad
    result = []
    for j, inp in _diff_inputs(inputs):
        n = inp._data.size
        cols = None
        for k in range(n):
            onehot = np.zeros(n, dtype=inp._data.dtype)
            onehot[k] = 1
            with fwad.dual_level():
                args = list(inputs)
                args[j] = fwad.make_dual(inp, _make(onehot.reshape(inp._data.shape)))
                outs = [o for o in _as_tuple(func(*args)) if isinstance(o, Tensor)]
                tans = []
                for o in outs:
                    t = fwad.unpack_dual(o).tangent
                    tans.append(np.zeros(o._data.size) if t is None else
                                np.asarray(t.detach()._host(), dtype=np.float64).reshape(-1))
            if cols is None:
                cols = [np.zeros((n, t.size)) for t in tans]
            for c, t in zip(cols, tans):
                c[k] = t
        if cols is None:  # an empty input
            outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]
            cols = [np.zeros((0, o._data.size)) for o in outs]
        result.append(cols)
    return result


def _check_zero_grad_outputs(outputs, inputs):
    from ember import autograd
    diff = [t for _, t in _diff_inputs(inputs)]
    zeros = [_make(np.zeros(o._data.shape, dtype=o._data.dtype)) for o in outputs]
    grads = autograd.grad(outputs, diff, zeros, allow_unused=True)
    for g, d in zip(grads, diff):
        if g is None:
            continue
        if np.any(np.asarray(g.detach()._host()) != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype is not d.dtype:
            raise GradcheckError("grad is incorrect type")
        if tuple(g.shape) != tuple(d.shape):
            raise GradcheckError("grad is incorrect size")


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False,
                  check_rev_over_rev=True, fast_mode=False, masked=False):
    """Check second derivatives (gradients of gradients) against finite differences.

    Runs :func:`gradcheck` on ``(inputs, grad_outputs) -> autograd.grad(func(inputs),
    inputs, grad_outputs, create_graph=True)``. Without ``grad_outputs``, random ones
    uniform in [-1, 1) (NumPy's global generator) are used.
    """
    from ember import autograd
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or "
                             "check_rev_over_rev to be True")
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.requires_grad]
        grad_outputs = []
        for o in outs:
            dt = o._data.dtype if o._data.dtype.kind == "f" else np.float64
            a = np.random.uniform(-1, 1, size=o._data.shape).astype(dt)
            if gen_non_contig_grad_outputs and a.ndim and a.size > 1:
                wide = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), dtype=a.dtype)
                wide[..., ::2] = a
                a = wide[..., ::2]
            grad_outputs.append(_make(a, True))
        grad_outputs = tuple(grad_outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_out = len(grad_outputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def new_func(*args):
        ins = args[:-n_out] if n_out else args
        outs = [o for o in _as_tuple(func(*ins)) if isinstance(o, Tensor) and o.requires_grad]
        gos = args[-n_out:] if n_out else ()
        grads = autograd.grad(outs, [ins[i] for i in diff_idx], gos, create_graph=True,
                              allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(new_func, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev,
                     fast_mode=fast_mode, masked=masked)
