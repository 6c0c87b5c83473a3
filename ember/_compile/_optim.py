"""Optimizer updates inside a compiled training step.

A compiled step that calls ``optimizer.step()`` runs the optimizer's own ``step`` (its
hooks, step counters, state and ``param_groups`` stay the optimizer's), with the
per-group update of SGD and Adam/AdamW swapped for one pass per parameter compiled
with numba (the ``ember[compile]`` extra). Each pass does, element by element, the
same float32 operations in the same order as eager ember's NumPy update, so the
parameters are eager ember's to the bit: SGD's ``p - lr * g`` is rounded once (the
float32 product is exact in float64), as PyTorch's fused multiply-add. Without numba,
or for options these passes do not cover (nesterov, dampening, amsgrad, complex or
non-contiguous parameters), the optimizer's own update runs.
"""
import numpy as np

from ember.optim.adam import Adam
from ember.optim.optimizer import _value
from ember.optim.sgd import SGD

__all__ = ["fused_step", "available"]

_kernels = {}


def _numba_kernels():
    """The compiled passes, built on first use (None without numba)."""
    if "sgd" in _kernels:
        return _kernels
    try:
        import numba
    except ImportError:
        _kernels.update(sgd=None, adam=None)
        return _kernels
    f32, f64 = np.float32, np.float64

    @numba.njit(nogil=True, cache=False)
    def sgd(p, g, b, momentum, alpha, has_buf):
        for i in range(p.size):
            gi = g[i]
            if has_buf:
                bi = b[i] * momentum
                bi = bi + gi
                b[i] = bi
                gi = bi
            p[i] = f32(f64(p[i]) + alpha * f64(gi))

    @numba.njit(nogil=True, cache=False)
    def adam(p, g, m, v, w1, low, beta2, omb2, bc2, eps, step_size):
        for i in range(p.size):
            gi = g[i]
            mi = m[i]
            d = gi - mi
            if low:
                mi = mi + d * w1
            else:
                mi = gi - d * w1
            m[i] = mi
            vi = v[i] * beta2
            gg = gi * gi
            gg = gg * omb2
            vi = vi + gg
            v[i] = vi
            den = np.sqrt(vi)
            den = den / bc2
            den = den + eps
            den = mi / den
            den = den * step_size
            p[i] = p[i] - den

    _kernels.update(sgd=sgd, adam=adam)
    return _kernels


def available():
    """True when numba is importable (the compiled optimizer passes run)."""
    return _numba_kernels()["sgd"] is not None


def _flat(a):
    return a.reshape(-1) if a.flags.c_contiguous and a.dtype == np.float32 else None


def _sgd_group(opt, group):
    lr = _value(group["lr"])
    momentum, dampening, nesterov = group["momentum"], group["dampening"], group["nesterov"]
    if dampening != 0 or nesterov:
        return SGD._step_group(opt, group)
    kernel = _kernels["sgd"]
    alpha = float(np.float32(-lr))
    mom = np.float32(momentum)
    for p, g, state in opt._grads(group, with_state=momentum != 0):
        pf, gf = _flat(p._data), _flat(g)
        has_buf = False
        bf = gf
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                from ember._tensor import _make
                state["momentum_buffer"] = buf = _make(g.copy())
                bf = _flat(buf._data)
                if pf is not None and bf is not None and gf is not None:
                    kernel(pf, bf, bf, mom, alpha, False)
                    continue
            else:
                bf = _flat(buf._data)
                has_buf = True
        if pf is None or gf is None or bf is None:
            _numpy_sgd_one(p, g, buf._data if momentum != 0 else None, momentum, lr,
                           has_buf)
            continue
        kernel(pf, gf, bf, mom, alpha, has_buf)


def _numpy_sgd_one(p, g, b, momentum, lr, has_buf):
    from ember.optim.optimizer import _axpy
    if b is not None:
        if has_buf:
            b *= momentum
            b += g
        g = b
    p._data[...] = _axpy(p._data, -lr, g)


def _adam_group(opt, group):
    if group["amsgrad"]:
        return Adam._step_group(opt, group)
    kernel = _kernels["adam"]
    lr = _value(group["lr"])
    beta1, beta2 = (_value(b) for b in group["betas"])
    w1 = 1 - beta1
    low = w1 < 0.5
    f32 = np.float32
    cw = f32(w1 if low else 1 - w1)
    b2, omb2, eps = f32(beta2), f32(1 - beta2), f32(group["eps"])
    for p, g, state in opt._grads(group):
        step = state["step"]._data.item()
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        step_size = lr / (1 - beta1 ** step)
        bc2 = (1 - beta2 ** step) ** 0.5
        flats = [_flat(a) for a in (p._data, g, m, v)]
        if any(f is None for f in flats):
            _numpy_adam_one(p, g, m, v, w1, beta2, eps, step_size, bc2)
            continue
        kernel(*flats, cw, low, b2, omb2, f32(bc2), eps, f32(step_size))


def _numpy_adam_one(p, g, m, v, w1, beta2, eps, step_size, bc2):
    from ember.optim.optimizer import _lerp_, _mul_addcmul_
    _lerp_(m, g, w1)
    gg = _mul_addcmul_(v, g, beta2)
    denom = np.sqrt(v, out=gg)
    denom /= bc2
    denom += eps
    np.divide(m, denom, out=denom)
    denom *= step_size
    p._data -= denom


def _fused_for(opt):
    if isinstance(opt, SGD) and type(opt)._step_group is SGD._step_group:
        return _sgd_group
    if isinstance(opt, Adam) and type(opt)._step_group is Adam._step_group:
        return _adam_group
    return None


def fused_step(opt):
    """Run ``opt.step()`` with its group update swapped for the compiled pass when
    there is one (see the module docstring)."""
    update = _fused_for(opt)
    if update is None or "_step_group" in opt.__dict__ or not available():
        return opt.step()
    opt._step_group = lambda group: update(opt, group)
    try:
        return opt.step()
    finally:
        del opt._step_group
