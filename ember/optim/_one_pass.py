"""SGD's and Adam's per-parameter update as one pass over memory (numba, lazily).

``SGD.apply_single`` and ``Adam.apply_single`` run these wherever numba is importable
(the ``ember[compile]`` and ``ember[fast]`` extras; :func:`wanted`), in eager steps and
in compiled training steps (:mod:`ember._compile` sets ``Optimizer._one_pass`` while it
calls ``optimizer.step()``). Each loop does, element by element, the same float32
operations in the same order as the NumPy update in ``apply_single``, so the
parameters come out the same to the bit: SGD's ``p - lr * g`` is rounded once (the
float32 product is exact in float64), as PyTorch's fused multiply-add. Each function
returns False, having changed nothing, where its loop does not cover the arrays
(not float32, not contiguous) or numba is missing; the caller then runs NumPy.
"""
import numpy as np

from ember._tensor import Tensor
from ember.backend.threads import get_num_threads, parallel_rows

__all__ = ["available", "sgd", "sgd_group", "adam", "adam_group"]

_kernels = {}


def _numba_kernels():
    """The compiled loops, built on first use (None without numba)."""
    if "sgd" in _kernels:
        return _kernels
    # ember's numba flags (numba_jit.njit): error_model="numpy", a float division is
    # IEEE's (inf or NaN, as NumPy's), not a test for zero before each one, which kept
    # Adam's loop from vectorizing (4x slower); and numba's on-disk cache, so a process
    # loads the loops instead of compiling them again on its first step
    try:
        from ember.backend.numba_jit import njit as jit
    except ImportError:
        _kernels.update(sgd=None, adam=None)
        return _kernels
    f32, f64 = np.float32, np.float64

    @jit
    def sgd(p, g, b, momentum, alpha, has_buf):
        for i in range(p.size):
            gi = g[i]
            if has_buf:
                bi = b[i] * momentum
                bi = bi + gi
                b[i] = bi
                gi = bi
            p[i] = f32(f64(p[i]) + alpha * f64(gi))

    @jit
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
    """True when numba is importable (the one-pass loops run)."""
    return _numba_kernels()["sgd"] is not None


def wanted(opt):
    """Whether ``opt``'s update should try the one-pass loops: always where numba is
    importable (the same values as the NumPy update, in one pass over memory instead
    of a dozen, and without its float64 temporaries), eager steps and compiled steps
    alike; ``opt._one_pass`` set to False by a caller (a benchmark comparing the two
    ways) keeps the NumPy update."""
    flag = opt.__dict__.get("_one_pass")
    return flag if flag is not None else available()


def _flat(a):
    return a.reshape(-1) if type(a) is np.ndarray and a.flags.c_contiguous and \
        a.dtype == np.float32 else None


def sgd(p, g, b, momentum, lr, has_buf):
    """``b = momentum * b + g`` (when ``has_buf``; else ``b`` is not read) and
    ``p -= lr * (b if has_buf else g)`` in place, without dampening or nesterov; False
    where not covered."""
    kernel = _numba_kernels()["sgd"]
    if kernel is None:
        return False
    pf, gf = _flat(p), _flat(g)
    bf = gf if b is None else _flat(b)
    if pf is None or gf is None or bf is None or pf.size != gf.size:
        return False
    kernel(pf, gf, bf, np.float32(momentum), float(np.float32(-lr)), has_buf)
    return True


def _plain32(a, shape):
    """Whether ``a`` is a C-contiguous native float32 NumPy array of ``shape`` (not 0-d)."""
    return type(a) is np.ndarray and a.shape == shape and a.dtype == _F32 and \
        a.flags.c_contiguous and a.ndim > 0


_F32 = np.dtype(np.float32)


def sgd_group(opt, group, lr):
    """``SGD.step``'s update of every parameter of ``group`` with a gradient, as
    :func:`sgd` does it (the same loop, one call per parameter), with the per-parameter
    bookkeeping of ``Optimizer._grads`` and ``SGD.apply_single`` done here once: the
    version counters of each parameter and of its state's tensors bumped after its
    update. Covers the plain case only -- no dampening, nesterov, maximize or weight
    decay; momentum with every buffer made by an earlier step, or none; each parameter,
    gradient and buffer a contiguous float32 array of one shape -- and returns False
    (nothing changed) otherwise, or without numba. ``lr``: the group's, as a number."""
    kernel = _numba_kernels()["sgd"]
    wd = group.get("weight_decay", 0)
    if kernel is None or group["maximize"] or group["nesterov"] or \
            group["dampening"] != 0 or type(wd) not in (int, float) or wd != 0:
        return False
    momentum = group["momentum"]
    state = opt.state
    todo = []
    for p in group["params"]:
        grad = p._grad
        if grad is None:
            continue
        pa, ga = p._data, grad._data
        shape = pa.shape if type(pa) is np.ndarray else None
        if not _plain32(pa, shape) or not _plain32(ga, shape):
            return False
        if momentum != 0:
            st = state.get(p)
            buf = None if st is None else st.get("momentum_buffer")
            if buf is None or not _plain32(buf._data, shape):
                return False  # the first step makes the buffers (``apply_single``)
            todo.append((p, pa, ga, buf._data, st))
        else:
            todo.append((p, pa, ga, ga, None))
    m32, alpha, has_buf = np.float32(momentum), float(np.float32(-lr)), momentum != 0
    _run_calls(kernel, [((pa.reshape(-1), ga.reshape(-1), b.reshape(-1)),
                         (m32, alpha, has_buf)) for _, pa, ga, b, _ in todo], 4)
    for p, *_, st in todo:
        p._vc[0] += 1
        if st is not None:
            for t in st.values():
                if isinstance(t, Tensor):
                    t._vc[0] += 1
    return True


def _adam_args(beta1, beta2, eps, step_size, bc2):
    """The loop's scalar arguments after its four arrays."""
    f32 = np.float32
    w1 = 1 - beta1
    low = w1 < 0.5
    return (f32(w1 if low else 1 - w1), low, f32(beta2), f32(1 - beta2), f32(bc2), f32(eps),
            f32(step_size))


def adam(p, g, m, v, beta1, beta2, eps, step_size, bc2):
    """Adam's update of ``p``, ``m``, ``v`` in place (no amsgrad), ``step_size`` and
    ``bc2`` the bias corrections of this step; False where not covered."""
    kernel = _numba_kernels()["adam"]
    if kernel is None:
        return False
    pf, gf, mf, vf = _flat(p), _flat(g), _flat(m), _flat(v)
    if pf is None or gf is None or mf is None or vf is None:
        return False
    kernel(pf, gf, mf, vf, *_adam_args(beta1, beta2, eps, step_size, bc2))
    return True


# elements per piece of a group's update split over the intra-op threads: pieces start
# at multiples of it, so that each element falls in the loop's vector body (or its tail)
# as in the whole array's call (each element's arithmetic is its own either way)
_GRAIN = 4096


def _run_calls(kernel, calls, cost):
    """``kernel(*arrays, *args)`` for each ``(arrays, args)`` of ``calls`` (one
    parameter's flat arrays and scalars each), over the intra-op threads when ember has
    several: the parameters' elements, in pieces of ``_GRAIN``, are cut into blocks of
    about equal size across parameters (a kernel call per parameter piece of a block).
    ``cost``: operations per element."""
    if get_num_threads() < 2:
        # one thread: each parameter's whole call, as the one block below would make
        # them, without its slicing arithmetic per parameter (a compiled step calls
        # this every step)
        for arrays, args in calls:
            kernel(*arrays, *args)
        return
    starts, total = [], 0
    for arrays, _ in calls:
        starts.append(total)
        total += -(-arrays[0].size // _GRAIN)

    def run(lo, hi):
        for (arrays, args), first in zip(calls, starts):
            n = arrays[0].size
            a, b = max(lo - first, 0) * _GRAIN, min((hi - first) * _GRAIN, n)
            if a >= b:
                continue
            if a == 0 and b == n:
                kernel(*arrays, *args)
            else:
                kernel(*[x[a:b] for x in arrays], *args)
    parallel_rows(run, total, cost * total * _GRAIN)


def adam_group(opt, group, lr, beta1, beta2):
    """``Adam.step``'s update of every parameter of ``group`` with a gradient, as
    :func:`adam` does it (the same loop and bias corrections, one call per parameter),
    with the per-parameter bookkeeping of ``Optimizer._grads`` and
    ``Adam.apply_single`` done here once: each parameter's ``step`` counter advanced
    before its update, the version counters of the parameter and of its state's tensors
    bumped after it. Covers the plain case only -- no amsgrad, maximize or weight decay;
    every state made by an earlier step; each parameter, gradient and moment a
    contiguous float32 array of one shape -- and returns False (nothing changed)
    otherwise, or without numba. ``lr``, ``beta1``, ``beta2``: the group's, as numbers."""
    kernel = _numba_kernels()["adam"]
    wd = group.get("weight_decay", 0)
    if kernel is None or group["maximize"] or group["amsgrad"] or \
            type(wd) not in (int, float) or wd != 0:
        return False
    eps = group["eps"]
    state = opt.state
    todo = []
    for p in group["params"]:
        grad = p._grad
        if grad is None:
            continue
        pa, ga = p._data, grad._data
        shape = pa.shape if type(pa) is np.ndarray else None
        st = state.get(p)
        if not st or not _plain32(pa, shape) or not _plain32(ga, shape):
            return False  # the first step makes the state (``_new_state``)
        m, v, step = st.get("exp_avg"), st.get("exp_avg_sq"), st.get("step")
        if m is None or v is None or step is None or not _plain32(m._data, shape) or \
                not _plain32(v._data, shape):
            return False
        todo.append((p, pa, ga, m._data, v._data, step, st))
    calls = []
    for _, pa, ga, m, v, step, _ in todo:
        step._data += 1
        n = step._data.item()
        calls.append(((pa.reshape(-1), ga.reshape(-1), m.reshape(-1), v.reshape(-1)),
                      _adam_args(beta1, beta2, eps, lr / (1 - beta1 ** n),
                                 (1 - beta2 ** n) ** 0.5)))
    _run_calls(kernel, calls, 12)
    for p, *_, st in todo:
        p._vc[0] += 1
        for t in st.values():
            if isinstance(t, Tensor):
                t._vc[0] += 1
    return True
